"""The bytes on disk: protobuf wire encoding, the messages TensorBoard reads, TFRecord framing, CRC-32C.

The lowest layer of the writer: pure functions of bytes and numbers, no threads, no files.
"""
