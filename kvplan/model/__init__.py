"""The model room. `config` reads a Hugging Face config.json (bounded by `fields.Reader`) and
hands it to the family's converter in `families` (one entry per family; `quant` reads the
weight format, `vision` a wrapper's vision tower) to build the frozen ModelSpec. The sizing
math over a ModelSpec: weights (`weights`, replayed through PyTorch's caching allocator in
`allocator`), the KV cache (`kv`), forward-pass buffers (`forward`), checkpoint tensor names
(`tensor_names`) and the image encoder's profile run (`multimodal`).

Only `config` reads files; everything else is pure.
"""
