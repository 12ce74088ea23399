"""Every Lua script dragoman runs on Redis, each in its own ``.lua`` file with one typed wrapper.

A wrapper is the only code that knows its script's KEYS and ARGV layout and reply shape: it
builds ``(keys, args)`` once (``layout``) and has thin methods to run them on a synchronous
client, an asyncio client or a pipeline. Each script is one atomic transition:

- ``submit.lua``      :class:`SubmitScript`     a job's stream entry and state record, idempotently
- ``cancel.lua``      :class:`CancelScript`     cancel a queued job, or ask its worker to abort it
- ``start.lua``       :class:`StartScript`      mark a batch running, skipping cancelled jobs
- ``finish.lua``      :class:`FinishScript`     ack a committed batch, finalise state, publish events
- ``requeue.lua``     :class:`RequeueScript`    a dead letter back on the jobs stream, exactly once
- ``count_after.lua`` :class:`CountAfterScript` a group's lag on Redis before 7
- ``overdue.lua``     :class:`OverdueScript`    a lane's undelivered entries that have waited long enough
- ``reserve.lua``     :class:`ReserveScript`    a tenant's queued-job allowance, admitted exactly
- ``refill.lua``      :class:`RefillScript`     tenants' staged entries into their lane, by deficit round robin
- ``unfinished_standalone.lua`` :class:`UnfinishedStandaloneScript` a tenant's queued and running stand-alone
  jobs, newest first (the job history), dropping finished ones from its set as it passes them
"""

from broker.scripts.cancel import CancelOutcome, CancelScript
from broker.scripts.count_after import CountAfterScript
from broker.scripts.finish import FinishedJob, FinishScript, TenantEventRetention
from broker.scripts.lua import Arg, LuaScript
from broker.scripts.overdue import Overdue, OverdueScript
from broker.scripts.refill import Refilled, RefillScript
from broker.scripts.requeue import RequeueScript
from broker.scripts.reserve import Admission, ReserveScript
from broker.scripts.start import MISSING, StartOutcome, StartScript
from broker.scripts.submit import SubmitScript
from broker.scripts.unfinished_standalone import UnfinishedStandaloneScript

__all__ = [
    "MISSING",
    "Admission",
    "Arg",
    "CancelOutcome",
    "CancelScript",
    "CountAfterScript",
    "FinishScript",
    "FinishedJob",
    "LuaScript",
    "Overdue",
    "OverdueScript",
    "RefillScript",
    "Refilled",
    "RequeueScript",
    "ReserveScript",
    "StartOutcome",
    "StartScript",
    "SubmitScript",
    "TenantEventRetention",
    "UnfinishedStandaloneScript",
]
