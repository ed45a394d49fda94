"""The one way daskpd builds Dask graphs: :class:`TaskGraph`, over ``dask.task_spec``.

The rule
--------
Every graph daskpd runs (an epoch, a round, an evaluation, a tree reduction, a set of chunk
tasks) is a :class:`TaskGraph`: ``graph.task(name, fn, *args)`` adds one
``dask.task_spec.Task`` and returns its ``TaskRef``, which later tasks take as an argument
(directly or inside a list, tuple or dict); ``graph.data(name, value)`` stores a value many
tasks read once, as a ``DataNode``, so the graph holds one copy of it. The graph then runs
once, whole:

- :meth:`TaskGraph.compute`: one ``dask.compute`` on the current scheduler (threads in
  process, or the active distributed client), results in the process;
- :meth:`TaskGraph.submit`: one ``client.get(..., sync=False)`` on a distributed client,
  results as futures that stay on the workers (tasks may be pinned to a worker and given
  retries, as layer annotations).

Neither ``dask.delayed`` nor legacy tuple task dicts are used to build graphs: a delayed
call costs about a millisecond to build (tokenizing its arguments), a tuple dict is a format
dask converts on every compute, and three ways of writing the same thing hid which tasks a
graph had. Futures from ``client.submit`` / ``client.scatter`` remain for what is not a graph:
placing data on a worker, and single tasks outside the epochs whose result the caller waits
for at once (a futures wave of independent setup tasks, as the data partition's and DSO's tile
prefetch). A future is a ``TaskRef``, so a graph's tasks take futures as arguments like their
own references. ``Dataset.to_delayed`` and the estimators' Dask-array scores hand Dask
collections to the caller: interfaces, not graphs daskpd runs.

Keys are ``f"{prefix}-{name}-{token}"``: the prefix says which method built the graph, the
name which task, and the token (fresh for each graph unless given) keeps two graphs from
sharing keys.
"""

from __future__ import annotations

import operator
import uuid

# dask (0.3-0.7 s to import, measured here) loads when a graph is built, not with the modules
# that import this one (the problem, generators, ingestion).

__all__ = ["TaskGraph"]


class TaskGraph:
    """Tasks of one Dask graph, run with one compute (:meth:`compute`) or submit (:meth:`submit`).

    Parameters
    ----------
    prefix : str
        First part of every key (the method or job that builds the graph).
    token : str, optional
        Last part of every key; a fresh random one by default.
    """

    def __init__(self, prefix, token=None):
        self.prefix = prefix
        self.token = uuid.uuid4().hex if token is None else token
        self._tasks = {}
        # annotations of the pinned tasks, by key (the others have none)
        self._annotations = {}

    def __len__(self):
        return len(self._tasks)

    def key(self, name):
        """The key of task ``name`` in this graph."""
        return f"{self.prefix}-{name}-{self.token}"

    def data(self, name, value):
        """Store ``value`` once in the graph; return its reference for the tasks that read it."""
        from dask.task_spec import DataNode, TaskRef

        key = self.key(name)
        self._tasks[key] = DataNode(key, value)
        return TaskRef(key)

    def collection(self, obj):
        """Take in the tasks of a Dask collection with one key (a ``Delayed``); its reference."""
        from dask._task_spec import convert_legacy_graph
        from dask.task_spec import TaskRef

        self._tasks.update(convert_legacy_graph(dict(obj.__dask_graph__())))
        return TaskRef(obj.key)

    def task(
        self, name, fn, *args, worker=None, allow_other_workers=False, retries=None, priority=None
    ):
        """Add the task ``fn(*args)``; return its reference.

        Parameters
        ----------
        name : str
            Unique within the graph.
        fn : callable
        *args
            Values, references of this graph's tasks, or futures; references may sit inside
            lists, tuples and dicts.
        worker : str, optional
            Run on this worker (on a client; ignored by :meth:`compute`).
        allow_other_workers : bool, default=False
            With ``worker``: whether the scheduler may run the task elsewhere (when the
            worker is gone) rather than only there.
        retries : int, optional
            Times the scheduler reruns the task after its worker dies (on a client).
        priority : int, optional
            Dask's task priority (higher first, among the tasks ready on a worker; on a
            client): for a small result the driver waits on beside long tasks.

        Returns
        -------
        dask.task_spec.TaskRef
        """
        from dask._task_spec import parse_input
        from dask.task_spec import Task, TaskRef

        key = self.key(name)
        if key in self._tasks:
            raise ValueError(f"task {key} is already in the graph")
        self._tasks[key] = Task(key, fn, *(parse_input(arg) for arg in args))
        annotations = {}
        if worker is not None:
            annotations.update(workers=[worker], allow_other_workers=allow_other_workers)
        if retries:
            annotations["retries"] = retries
        if priority is not None:
            annotations["priority"] = int(priority)
        if annotations:
            self._annotations[key] = annotations
        return TaskRef(key)

    def parts(self, ref, n, name, worker=None):
        """Tasks ``ref[0]``, ..., ``ref[n - 1]`` (run where ``ref`` is: nothing moves)."""
        return tuple(self.part(ref, k, name, worker) for k in range(n))

    def part(self, ref, k, name, worker=None):
        """Task ``ref[k]``, named ``f"{name}-{k}"``."""
        return self.task(f"{name}-{k}", operator.getitem, ref, k, worker=worker)

    def tree(self, name, fn, parts, fan_in=2, lone_task=False):
        """Reduce ``parts`` with ``fn(*group)`` over groups of ``fan_in``, level by level.

        A last group of one part goes up unchanged, or (``lone_task``) as ``fn(part)``, a
        task of its own. One part is returned as it is.
        """
        parts = list(parts)
        level = 0
        while len(parts) > 1:
            level += 1
            parts = [
                parts[k]
                if k + 1 == len(parts) and not lone_task
                else self.task(f"{name}-{level}-{k // fan_in}", fn, *parts[k : k + fan_in])
                for k in range(0, len(parts), fan_in)
            ]
        return parts[0]

    def _take(self):
        tasks, annotations = self._tasks, self._annotations
        self._tasks, self._annotations = {}, {}
        return tasks, annotations

    @staticmethod
    def _own(refs, tasks):
        """Which of ``refs`` are references to ``tasks`` (not futures, not plain values)."""
        from dask.task_spec import TaskRef

        # a future is a TaskRef too, of a subclass
        return [type(ref) is TaskRef and ref.key in tasks for ref in refs]

    def compute(self, outputs, **kwargs):
        """Run the graph with one ``dask.compute``; return the values of ``outputs``.

        ``outputs`` items that are not this graph's references are returned as they are.
        ``kwargs`` go to ``dask.compute`` (``scheduler=...``). The graph is emptied.
        """
        import dask
        from dask.delayed import Delayed

        tasks, _ = self._take()
        outputs = list(outputs)
        own = self._own(outputs, tasks)
        wanted = [Delayed(ref.key, tasks) for ref, mine in zip(outputs, own, strict=True) if mine]
        values = iter(dask.compute(*wanted, **kwargs) if wanted else ())
        return [next(values) if mine else ref for ref, mine in zip(outputs, own, strict=True)]

    def submit(self, client, outputs):
        """Send the graph to ``client`` in one message; return futures of ``outputs``.

        Pinned tasks keep their worker and retries (layer annotations). ``outputs`` items that
        are not this graph's references are returned as they are. The graph is emptied.
        The caller keeps the futures the graph's tasks read until its outputs are done: the
        graph sent does not hold them (one dropped before the scheduler has the graph is
        lost to its tasks).
        """
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

        tasks, annotations = self._take()
        outputs = list(outputs)
        own = self._own(outputs, tasks)
        keys = list(dict.fromkeys(ref.key for ref, mine in zip(outputs, own, strict=True) if mine))
        if not keys:
            return outputs
        # a layer per pinned task (its annotations), one for the rest
        plain = {key: task for key, task in tasks.items() if key not in annotations}
        layers = {
            key: MaterializedLayer({key: tasks[key]}, annotations=annotations[key])
            for key in annotations
        }
        if plain:
            layers[self.key("plain")] = MaterializedLayer(plain)
        graph = HighLevelGraph(layers, {name: set() for name in layers})
        made = dict(zip(keys, client.get(graph, keys, sync=False), strict=True))
        return [made[ref.key] if mine else ref for ref, mine in zip(outputs, own, strict=True)]
