"""Three LLVM operations numba does not expose, for the DSO tile loop (the first two), the
CoCoA+ passes and the SPDC rows (the prefetch), and SPDC's threaded rows (the atomic add).

- :func:`prefetch_record`: the update reads and writes one record of a random row and one of
  a random column per nonzero; on splice-like tiles the row records miss the core's caches and
  the out-of-order window holds only a few updates' worth of that latency. Asking for the
  records a few nonzeros ahead overlaps the misses with the updates in between. It emits
  ``llvm.prefetch``, a hint that never faults and never changes a result.
- :func:`div_sqrt_pair`: the two AdaGrad steps of an update, ``a / sqrt(c)`` and
  ``b / sqrt(d)``, as one two-lane square root and one two-lane division: the divide/square
  root unit takes a two-lane operation about as fast as a scalar one, and it was the busiest
  part of the update (BENCHMARKS.md, DSO: "Both AdaGrad steps in one ..."). IEEE 754
  rounds each lane exactly as the scalar operation, so the results are the same bits.
- :func:`atomic_add_record`: ``records[row, column] += value`` as one atomic
  read-modify-write (``atomicrmw fadd``; on x86 a compare-and-swap loop). SPDC's threads add
  their dual steps to the shared ``u = X^T z / n``; a plain ``+=`` from two threads loses
  updates on the columns both touch (1.5% of ``u``'s norm after a few epochs at 1e8), and
  ``u`` must stay ``X^T z / n`` for the method's fixed point to be the optimum.
"""

from __future__ import annotations

from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: LLVM's arguments: prefetch for writing (the update stores to the record), keep in all
#: cache levels, data (not instruction) cache.
_FOR_WRITE, _KEEP_ALL_LEVELS, _DATA_CACHE = 1, 3, 1
#: The intrinsic is overloaded on the pointer type, whose mangled name changed when LLVM 15
#: made pointers opaque (older llvmlite builds ship LLVM 14).
_INTRINSIC = "llvm.prefetch.p0" if binding.llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"


@intrinsic
def prefetch_record(typingctx, records, index):
    """Hint the CPU to bring ``records[index, 0]`` (the start of a record) into cache.

    Parameters
    ----------
    records : 2-D C-contiguous array
        One record per row (the packed ``w`` columns or dual rows of the DSO kernel).
    index : int
        Row whose record will be needed soon. It must be a valid row: the address is
        computed without a bounds check.
    """
    if not (isinstance(records, types.Array) and records.ndim == 2):
        return None
    if not isinstance(index, types.Integer):
        return None
    signature = types.void(records, index)

    def codegen(context, builder, sig, args):
        array_type, index_type = sig.args
        array = context.make_array(array_type)(context, builder, args[0])
        row = context.cast(builder, args[1], index_type, types.intp)
        zero = context.get_constant(types.intp, 0)
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, array, [row, zero], wraparound=False
        )
        pointer = builder.bitcast(pointer, ir.IntType(8).as_pointer())
        int32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [pointer.type, int32, int32, int32])
        function = cgutils.get_or_insert_function(builder.module, function_type, _INTRINSIC)
        builder.call(
            function, [pointer, int32(_FOR_WRITE), int32(_KEEP_ALL_LEVELS), int32(_DATA_CACHE)]
        )
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def div_sqrt_pair(typingctx, a, b, c, d):
    """``(a / sqrt(c), b / sqrt(d))`` in float64, with two-lane vector operations.

    Bit for bit the scalar ``a / math.sqrt(c), b / math.sqrt(d)`` (each lane is correctly
    rounded), so a NumPy reference that computes them one at a time matches exactly.
    """
    # float64 only: the codegen builds <2 x double> from the arguments as they come
    if not all(arg == types.float64 for arg in (a, b, c, d)):
        return None
    pair = types.UniTuple(types.float64, 2)
    signature = pair(types.float64, types.float64, types.float64, types.float64)

    def codegen(context, builder, sig, args):
        double = ir.DoubleType()
        vector = ir.VectorType(double, 2)
        int32 = ir.IntType(32)

        def lanes(first, second):
            packed = ir.Constant(vector, ir.Undefined)
            packed = builder.insert_element(packed, first, int32(0))
            return builder.insert_element(packed, second, int32(1))

        sqrt = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector]), "llvm.sqrt.v2f64"
        )
        roots = builder.call(sqrt, [lanes(args[2], args[3])])
        quotient = builder.fdiv(lanes(args[0], args[1]), roots)
        parts = [builder.extract_element(quotient, int32(lane)) for lane in (0, 1)]
        return context.make_tuple(builder, pair, parts)

    return signature, codegen


@intrinsic
def atomic_add_record(typingctx, records, row, column, value):
    """``records[row, column] += value`` as one atomic operation (relaxed ordering).

    Parameters
    ----------
    records : 2-D float64 array
    row, column : int
        A valid element: the address is computed without a bounds check.
    value : float64
    """
    if not (
        isinstance(records, types.Array) and records.ndim == 2 and records.dtype == types.float64
    ):
        return None
    if not (isinstance(row, types.Integer) and isinstance(column, types.Integer)):
        return None
    if value != types.float64:
        return None
    signature = types.void(records, row, column, value)

    def codegen(context, builder, sig, args):
        array_type = sig.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        index = [context.cast(builder, args[i], sig.args[i], types.intp) for i in (1, 2)]
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, array, index, wraparound=False
        )
        # monotonic: the sum must not lose an addend; nothing else is ordered by it
        builder.atomic_rmw("fadd", pointer, args[3], "monotonic")
        return context.get_dummy_value()

    return signature, codegen
