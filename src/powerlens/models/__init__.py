"""models: where weights come from and how each architecture's matrices are read out of them.

    archs       the paper's 13 model configurations, tiny test configurations and GGUF models (twin configs)
    adapters    one adapter per architecture (ALBERT, BERT, GPT-2, GPT-Neo, Llama, Gemma 3): every
                architecture fact lives here, registered in ``ADAPTERS``
    sources/    one module per source kind (hub, local, package, gguf, twin), registered in ``SOURCES``;
                files (sha256 tables, folder checks), coverage (weights vs config), loading (a manifest ->
                model, tokenizer)
    locate      a model argument (folder, run's model folder, hub id) -> where its weights are, and its label
    weights     LayerWeights / ModelWeights containers, saved as safetensors + JSON
    attention   the attention sublayer recomputed from extracted matrices (the reference forward) and the
                attention-only law's normalisation
    verify      proof of extraction: reference forward vs the real transformers module
    hooks       forward hooks at an adapter's observation sites (a layer's input and output)
    direct      W_V and W_O read straight from a checkpoint's safetensors (no model built)

Imports only from :mod:`powerlens.core`.
"""
