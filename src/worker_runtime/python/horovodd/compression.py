"""Gradient compression for allreduce, as in Horovod: Compression.none sends
tensors as they are, Compression.fp16 sends floating-point tensors as float16
and converts the result back."""

from horovodd import _tensors


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor,
    context) -> the tensor in its original form."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, context):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


class FP16Compressor(Compressor):
    """Halves the bytes on the wire for float32/float64 tensors; other dtypes
    pass unchanged. The context is the original dtype's name."""

    @staticmethod
    def compress(tensor):
        if not _tensors.is_floating(tensor) or _tensors.dtype_name(tensor) == "float16":
            return tensor, None
        return _tensors.cast(tensor, "float16"), _tensors.dtype_name(tensor)

    @staticmethod
    def decompress(tensor, context):
        return tensor if context is None else _tensors.cast(tensor, context)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
