"""Where the rows of a batch and the cases of an eval run.

``local`` (default) runs them on this process's asyncio loop; ``ray`` runs the
same code on Ray workers (the ``ray`` extra). Either way the
caller (:func:`teamrun.evals.batch.run_batch`, :func:`teamrun.evals.evaluate.evaluate`)
keeps the progress, the total budget and the output, so both engines give the
same results in the same order.
"""

from teamrun.evals.engines.base import ENGINES, Engine, EngineName

__all__ = ["ENGINES", "Engine", "EngineName"]
