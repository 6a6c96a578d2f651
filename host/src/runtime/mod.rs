//! The policy component under wasmtime: load, limit, call, hot-swap.
