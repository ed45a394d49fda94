"""What two or more methods share: graph shapes, hand-overs, blocks, groups, reductions.

- :mod:`.chain`: the chained pass (SPDC, DSPDC): the carry through the row blocks in one graph;
- :mod:`.coordinate`: the stochastic primal-dual coordinate methods' problem translation,
  step sizes, row draws and the solver class they share (SPDC, DSPDC);
- :mod:`.shared`: arrays handed between the processes of one machine through shared memory;
- :mod:`.blocks`: a row block in the kernels' CSR types, kept in its worker;
- :mod:`.groups`: row groups resident on their workers, their weights and threads;
- :mod:`.scores`: ``X @ w`` a task per block, and the rows read ahead for it.

Nothing here imports a method or the driver's run (only :mod:`daskpd.solvers.driver.types`
and :mod:`daskpd.solvers.driver.seeds`).
"""
