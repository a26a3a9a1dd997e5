"""The model room: a Hugging Face config.json → ModelSpec (one converter per family, in
`families`), and the sizing math over a ModelSpec — weights (`weights`, replayed through
PyTorch's caching allocator in `allocator`), KV cache (`kv`), forward-pass buffers (`forward`),
checkpoint tensor names (`tensor_names`) and the image encoder's profile run (`multimodal`).

Only `config` reads files; everything else is pure.
"""
