"""Process set-up of a pipeline step: thread counts, MKL's reproducible mode, the allocator, the compute device.

Every step calls :func:`set_threads` first (the rule's ``threads``), so results do not depend on how many
cores a machine has nor on how MKL schedules its threads from run to run, and freed activations go back to
the OS; :func:`resolve_device` turns the config's ``device`` into the one a step runs on. The Python API
(:class:`powerlens.api.Lens`) leaves the user's process as it is: call :func:`reproducible_mkl` before any
product for the pipeline's bits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from powerlens.core.errors import PowerlensError


def fixed_mmap_threshold(nbytes: int = 128 * 1024) -> bool:
    """Serve every allocation above ``nbytes`` by mmap, so freed activations go back to the OS.

    glibc raises its mmap threshold each time a large mmapped block is freed; after that, activations of
    varying batch shapes come from the heap, which fragments and only grows. Measured on the gpt2-xl twin,
    model-mode dynamics over the corpus: peak RSS 17.1 GB with glibc's default, vs 6.2 GB of weights.
    Setting the threshold once (``mallopt(M_MMAP_THRESHOLD)``) also switches the adjustment off. No-op where
    the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-3, int(nbytes)))  # -3 = M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False


#: The code branches MKL documents for ``MKL_CBWR`` (oneMKL developer guide, "Specifying Code Branches", and the
#: reference's "Named Constants for CNR Control"; some deprecated, kept so an older setting still passes), each
#: optionally written ``BRANCH=<branch>`` and followed by ``,STRICT``, in capitals. MKL ignores any other value
#: without a word: measured with MKL_VERBOSE, "garbage", "avx2" and " AVX2" all run the AUTO branch.
MKL_CBWR_BRANCHES = ("AUTO", "COMPATIBLE", "SSE2", "SSE3", "SSSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2", "AVX2_E1",
                     "AVX512", "AVX512_E1", "AVX512_E2", "AVX512_E3", "AVX512_E4", "AVX512_MIC", "AVX512_MIC_E1")


def check_mkl_cbwr(value: str) -> str:
    """Refuse an ``MKL_CBWR`` that MKL does not document (it would be recorded as the branch in force while MKL
    silently ignores it); returns the value."""
    branch = value  # as MKL reads it: case and spaces count (" AVX2" and "avx2" run AUTO)
    if branch.endswith(",STRICT"):
        branch = branch[: -len(",STRICT")]
    if branch.startswith("BRANCH="):
        branch = branch[len("BRANCH="):]
    if branch not in MKL_CBWR_BRANCHES:
        raise PowerlensError(
            f"MKL_CBWR={value!r} is not a code branch MKL documents: MKL ignores it without a word (it runs its "
            "AUTO branch, as MKL_VERBOSE shows), while the outputs would record it as the branch in force",
            f"unset MKL_CBWR (the pipeline sets AUTO), or set it to one of {', '.join(MKL_CBWR_BRANCHES)}, "
            "optionally as BRANCH=<branch> and with ,STRICT after it (e.g. MKL_CBWR=AVX2,STRICT)")
    return value


def reproducible_mkl() -> str:
    """Put MKL (torch's BLAS on x86) in its conditional numerical reproducibility mode, ``MKL_CBWR=AUTO``,
    unless the environment already chose a branch; MKL reads it at its first call, so every step sets it
    before any matrix product. Returns the branch in force (recorded in each output's provenance).

    MKL documents run-to-run differences outside this mode (threaded algorithms, alignment, dispatch) even
    with a fixed thread count. Measured on this project's SLURM test (2-core node, 2 threads per job, MKL's
    dynamic threading already off): 3 of 44 model-mode dynamics jobs over five SLURM runs (CI's included)
    had the rows one thread computed in one product of one batch (128 of 256 tokens) come out a few float32
    ulps apart, 1e-5 after three layers, so the job's arrays differed from the same job run locally; never
    seen in about 90 runs outside Snakemake's SLURM executor (plain, loaded, under sbatch and srun). With
    ``AUTO``: 0 of 48 over 12 SLURM runs, and the outputs are bit-identical to MKL's default on this CPU
    (the code path is the one MKL picks; ``COMPATIBLE`` or ``AVX2``, set by hand, also fix the path across
    CPUs, at a cost in speed). A value MKL does not document is refused (:func:`check_mkl_cbwr`).

    Not every one-off is gone: CI's SLURM test at fa465ac found one attention-only job (the tiny GPT-Neo twin)
    whose float64 entropy sum came out 4.5e-12 (about ten ulps) from the local run's, every other array of it
    identical. Here, 96 of 96 of the same jobs under the SLURM executor (twelve rounds of eight) and the same
    job 20 times locally (alone, beside a two-core load, on one CPU, with 1 or 2 threads) were identical to the
    local run. So the SLURM test reruns the jobs of an array that differs, once on each side, and fails only if
    the difference comes back (tests/slurm/run_slurm_test.sh)."""
    return check_mkl_cbwr(os.environ.setdefault("MKL_CBWR", "AUTO"))


_BRANCH_IN_FORCE: list[str | None] = []


def mkl_branch_in_force() -> str | None:
    """The code branch MKL itself reports running (the ``CNR:`` field of its verbose line for one small product,
    read in this process through torch's MKL verbose switch), or None where torch has no MKL. This, not the
    ``MKL_CBWR`` the environment asked for, is what the outputs record as the branch in force: MKL honours an
    instruction-set branch only on processors it recognises, and runs it as AUTO elsewhere (seen on an AMD
    EPYC with AVX2 and AVX-512: ``AVX2,STRICT`` runs as ``AUTO,STRICT``, ``AVX512`` as ``AUTO``; ``AUTO`` and
    ``COMPATIBLE`` as asked). Asked once per process, after :func:`reproducible_mkl` (MKL reads ``MKL_CBWR`` at
    its first call); the product's result is not used."""
    if _BRANCH_IN_FORCE:
        return _BRANCH_IN_FORCE[0]
    import re
    import sys
    import tempfile

    import torch

    found = None
    if torch.backends.mkl.is_available():
        a = torch.ones(8, 8, dtype=torch.float32)
        sys.stdout.flush()
        saved = os.dup(1)
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 1)  # MKL prints its verbose lines to the C stdout
            try:
                with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                    a @ a
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                if os.environ.get("MKL_VERBOSE", "0").strip() not in ("", "0"):  # the user's own verbose output
                    torch._C._verbose.mkl_set_verbose(1)
            tmp.seek(0)
            modes = set(re.findall(r"CNR:(\S+)", tmp.read().decode(errors="replace")))
        found = modes.pop() if len(modes) == 1 else None
    _BRANCH_IN_FORCE.append(found)
    return found


#: torch's CPU allocator backs every array of 2 MiB or more with transparent huge pages when this variable is
#: "1" (read once, at its first allocation). See :func:`set_threads`'s ``huge_pages``.
HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"


def set_threads(n: int, torch: bool = True, huge_pages: bool = False) -> int:
    """Fix the thread count of torch and BLAS for this process (the rule's ``threads``), MKL's reproducible
    mode (:func:`reproducible_mkl`) and the allocator's mmap threshold (:func:`fixed_mmap_threshold`); every
    step calls this first. ``torch=False``: a step that
    never runs torch (spectra) leaves it unimported; BLAS (numpy, scipy) is fixed all the same.

    ``huge_pages``: torch's large arrays on transparent huge pages (:data:`HUGE_PAGES`, unless the environment
    already sets it; it must be set before torch allocates, so before anything imports torch). Each mmapped
    array otherwise costs a page fault per 4 KiB page when first written, and the dynamics step makes and frees
    arrays of tens to hundreds of MiB for every chunk of the null's draws. The same arithmetic, the same bits.
    Measured here (2 cores, THP "madvise"): SmolLM2's attention-only dynamics 57 s -> 49 s, Gemma 3's control in
    model mode 113 s -> 96 s, peak RSS unchanged, outputs byte-identical; Gemma 3's steering was slower with it
    (104 s -> 118 s), so only the dynamics step asks for it."""
    if huge_pages:
        os.environ.setdefault(HUGE_PAGES, "1")
    fixed_mmap_threshold()
    reproducible_mkl()
    n = max(1, int(n))
    if torch:
        import torch as _torch

        _torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except Exception:  # pragma: no cover
        pass
    return n


def resolve_device(requested: str) -> str:
    """``auto`` -> cuda when present, else cpu; ``cuda`` without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise PowerlensError("device: cuda was requested but no CUDA device is visible",
                             "set `device: auto` or `device: cpu` in the config, or run on a GPU node")
    return requested
