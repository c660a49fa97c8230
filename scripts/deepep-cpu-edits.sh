#!/bin/sh
# deepep-cpu-edits.sh legacy|main FILE...: the mechanical edits that let DeepEP's test files run on
# CPU tensors against deep_ep, in place (scripts/deepep-tests.sh calls it on temporary copies).
#   both: cuda -> cpu ('cuda', "cuda", cuda:N, torch.cuda.X -> torch.cpu.X: synchronize and
#     set_device are no-ops there, Event times with deep_ep's _torch_cpu), 'nccl' -> 'gloo', the
#     profiler's CUDA activity and sort key -> CPU (bench_kineto then reads the rows that
#     deep_ep's torch.profiler.record_function calls make, by name), torch.cuda._sleep(cycles)
#     -> time.sleep(cycles / 2e9), the 8192x8192 dummy GEMMs -> 256x256.
#   legacy (V1's tests: at V1's commit, and main's tests/legacy): all_gather_into_tensor into a
#     stacked [ranks, ...] output -> all_gather into its slices (gloo takes only the concatenated
#     form, which main's test_engram uses).
#   main: the 256 MB L2 flushes -> 256 KB and test_pp's 16 GiB one -> 128 KB; envs.py asks
#     deep_ep.get_physical/logical_domain_size(group) instead of deep_ep._C over an NCCL
#     communicator (deep_ep has neither); get_rdma_gbs() is 10 GB/s where ibstat is missing
#     (test_pp divides by it); test_internode's "8 ranks per node" asserts -> "more than one node";
#     refs.py's all_to_all_single of x and sf rows, and test_engram's gather of its storage, move
#     bytes (uint8 views: gloo has no bf16 all-to-all and no FP8 at all);
#     test_agrs's tensors: stress shape (32, 64, 2048) -> (8, 64, 256) (its references took 6.5 GB
#     a rank), profiled sizes up to 2^21 bytes (not 2^26); test_internode's tuning loops: the
#     first, middle and last chunk size of each of their ranges (dispatch 9 configurations of 88,
#     combine 9 of 42: the full loops take minutes of profiling on 2 cores).
set -eu
kind=${1:?usage: $0 legacy|main FILE...}
shift
sed -i -e "s/torch\.cuda\._sleep(/__import__('time').sleep(1 \/ 2e9 * /g" \
       -e "s/'cuda'/'cpu'/g; s/\"cuda\"/\"cpu\"/g; s/cuda:/cpu:/g; s/torch\.cuda\./torch.cpu./g" \
       -e "s/'nccl'/'gloo'/g" \
       -e "s/ProfilerActivity\.CUDA/ProfilerActivity.CPU/g; s/cuda_time_total/cpu_time_total/g" \
       -e "s/(8192, 8192)/(256, 256)/g" \
       "$@"
case $kind in
  legacy)
    sed -i -e \
      "s/all_gather_into_tensor(\([a-z_]*\), \([a-z_]*\)/all_gather(list(\1.unbind(0)), \2/g" \
      "$@" ;;
  main)
    sed -i -e "s/256e6/256e3/g; s/(131072, 32768)/(128, 256)/g" \
           -e "s/^import deep_ep\._C as _C$/import deep_ep as _C/" \
           -e "s/^from \.comm import get_nccl_comm_handle$//" \
           -e "s/get_nccl_comm_handle(group)\.get()/group/g" \
           -e "/^def get_rdma_gbs/,/return 0$/ s/return 0$/return 10/" \
           -e "s/num_local_ranks == 8 and num_ranks > 8/num_ranks > num_local_ranks/" \
           -e "s/and num_local_ranks == 8$/and num_ranks > num_local_ranks/" \
           -e "s/shape = (32, 64, 2048)/shape = (8, 64, 256)/; s/(2 \*\* 26,)/(2 ** 21,)/" \
           -e "s/nvl_chunk_size in range(4, 45, 4)/nvl_chunk_size in range(4, 45, 20)/" \
           -e "s/rdma_chunk_size in range(4, 33, 4)/rdma_chunk_size in range(4, 33, 14)/" \
           -e "s/nvl_chunk_size in range(1, 8, 1)/nvl_chunk_size in range(1, 8, 3)/" \
           -e "s/rdma_chunk_size in range(12 if num_nodes == 2 else 8, 33, 4)/rdma_chunk_size in range(12 if num_nodes == 2 else 8, 33, 10)/" \
           -e "s/for num_bytes in (2 \*\* p for p in range(20, 27))/for num_bytes in (2 ** p for p in range(20, 22))/" \
           -e "s/all_gather_into_tensor(global_storage, local_storage,/all_gather_into_tensor(global_storage.view(torch.uint8), local_storage.view(torch.uint8),/" \
           -e "s/all_to_all_single(recv_\(x\|sf\), send_\(x\|sf\),/all_to_all_single(recv_\1.view(torch.uint8), send_\2.view(torch.uint8),/" \
           "$@" ;;
  *) echo "deepep-cpu-edits.sh: kind '$kind' must be legacy or main" >&2; exit 2 ;;
esac
