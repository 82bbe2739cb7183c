"""powerlens: transformer layers read as power-method steps.

Replicates and extends Li & Altafini, "Analogies between Transformer Layers and Power Method"
(arXiv 2605.25619). All logic lives in this package; ``scripts/`` holds thin command-line wrappers and
the Snakemake workflow wires them together.

Modules, one concept each:
    errors      PowerlensError: every user-facing failure, with the problem and the fix
    io          atomic writes, sha256, JSON helpers
    archs       the paper's 13 model configurations and tiny test configurations (architecture twins)
    sources     where weights come from: hf, local, package, random (twin); manifests and lock files
    adapters    one adapter per architecture (ALBERT, BERT, GPT-2, GPT-Neo) in one registry
    weights     LayerWeights / ModelWeights containers, saved as safetensors + JSON
    attention   the attention sublayer recomputed from extracted matrices (the reference forward)
    verify      proof of extraction: reference forward vs the real transformers module
    provenance  versions, BLAS, seeds, config hash
"""

__version__ = "0.1.0"
