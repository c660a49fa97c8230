"""Config: DeepEP's tuning record. On the CPU its values are accepted and checked; they do not
change results."""

from __future__ import annotations


class Config:
    def __init__(self, num_sms: int = 20, num_max_nvl_chunked_send_tokens: int = 6,
                 num_max_nvl_chunked_recv_tokens: int = 256,
                 num_max_rdma_chunked_send_tokens: int = 6,
                 num_max_rdma_chunked_recv_tokens: int = 256) -> None:
        values = {"num_sms": num_sms,
                  "num_max_nvl_chunked_send_tokens": num_max_nvl_chunked_send_tokens,
                  "num_max_nvl_chunked_recv_tokens": num_max_nvl_chunked_recv_tokens,
                  "num_max_rdma_chunked_send_tokens": num_max_rdma_chunked_send_tokens,
                  "num_max_rdma_chunked_recv_tokens": num_max_rdma_chunked_recv_tokens}
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"deep_ep.Config: {name}={v!r} must be a positive int")
        self.num_sms = num_sms
        self.num_max_nvl_chunked_send_tokens = num_max_nvl_chunked_send_tokens
        self.num_max_nvl_chunked_recv_tokens = num_max_nvl_chunked_recv_tokens
        self.num_max_rdma_chunked_send_tokens = num_max_rdma_chunked_send_tokens
        self.num_max_rdma_chunked_recv_tokens = num_max_rdma_chunked_recv_tokens

    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        """Bytes the receive rows of `num_ranks` ranks take at `hidden_bytes` per token."""
        return int(hidden_bytes) * int(num_ranks) * self.num_max_nvl_chunked_recv_tokens

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        return int(hidden_bytes) * int(num_ranks) * self.num_max_rdma_chunked_recv_tokens

    def __repr__(self) -> str:
        return (f"Config({self.num_sms}, {self.num_max_nvl_chunked_send_tokens}, "
                f"{self.num_max_nvl_chunked_recv_tokens}, {self.num_max_rdma_chunked_send_tokens}, "
                f"{self.num_max_rdma_chunked_recv_tokens})")
