"""torch.return_types: the named tuples torch's reductions return (fields `.values` / `.indices`,
aminmax's `.min` / `.max`), under torch's names. The functions are the core's (ops/reductions.py,
ops/sorting.py, ops/selection.py)."""
from __future__ import annotations

from ..ops.reductions import MaxResult as max, MinResult as min  # noqa: A001,F401
from ..ops.selection import (AminmaxResult as aminmax, CummaxResult as cummax,  # noqa: F401
                             CumminResult as cummin, ModeResult as mode)
from ..ops.sorting import (KthvalueResult as kthvalue, MedianResult as median,  # noqa: F401
                           SortResult as sort, TopkResult as topk)
