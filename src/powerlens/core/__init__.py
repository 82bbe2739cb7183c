"""core: what every other layer uses, with no numpy-heavy or torch import at module level.

    errors      PowerlensError: every user-facing failure, with the problem and the fix
    io          atomic writes (group-readable under the umask), sha256, JSON, reads of generated files
    runtime     a step's process set-up: threads, the allocator's mmap threshold, the device
    progress    progress lines in logs, bars on a terminal
    corpus      prompt files, tokenization and batches
    fmt         the one number format of every table (3 significant digits)
    scratch     buffers a step reuses across its Monte Carlo chunks (the same bits, less allocation)

Imports nothing from the other layers.
"""
