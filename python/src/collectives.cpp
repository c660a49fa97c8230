// Teams and the team-based collectives. Broadcast, fcollect and alltoall move bytes (their *mem
// forms); the reductions are stamped from the reduction type tables as OP_reduce_TYPENAME, so
// the package finds the types each reduction supports by their names. Team handles cross the
// boundary as addresses.
#include <shmem.h>

#include <string>

#include "bindings.hpp"

namespace shmoe::python {
namespace {

shmem_team_t team_of(Address t) {
  return reinterpret_cast<shmem_team_t>(t);
}
Address address_of(shmem_team_t t) {
  return reinterpret_cast<Address>(t);
}

#define SHMOE_PY_REDUCE(T, N, OP)                                                        \
  m.def((std::string(#OP "_reduce_") + #N).c_str(),                                      \
        [](Address team, Address dest, Address src, std::size_t n) {                     \
          return released([&] {                                                          \
            return shmem_##N##_##OP##_reduce(team_of(team), at<T>(dest), at<T>(src), n); \
          });                                                                            \
        });
#define SHMOE_PY_REDUCE_BITWISE(T, N) \
  SHMOE_PY_REDUCE(T, N, and) SHMOE_PY_REDUCE(T, N, or) SHMOE_PY_REDUCE(T, N, xor)
#define SHMOE_PY_REDUCE_MINMAX(T, N) SHMOE_PY_REDUCE(T, N, max) SHMOE_PY_REDUCE(T, N, min)
#define SHMOE_PY_REDUCE_ARITH(T, N) SHMOE_PY_REDUCE(T, N, sum) SHMOE_PY_REDUCE(T, N, prod)

}  // namespace

void bind_collectives(py::module_& m) {
  m.def("team_world", [] { return address_of(SHMEM_TEAM_WORLD); });
  m.def("team_shared", [] { return address_of(SHMEM_TEAM_SHARED); });
  m.def("team_my_pe", [](Address t) { return shmem_team_my_pe(team_of(t)); });
  m.def("team_n_pes", [](Address t) { return shmem_team_n_pes(team_of(t)); });
  m.def("team_translate_pe", [](Address from, int pe, Address to) {
    return shmem_team_translate_pe(team_of(from), pe, team_of(to));
  });
  // (status, new team): the members get 0 and the team, the others 0 and no team; -1 everywhere
  // for a refused split.
  m.def("team_split_strided", [](Address parent, int start, int stride, int size) {
    shmem_team_t team = SHMEM_TEAM_INVALID;
    const int rc = released([&] {
      return shmem_team_split_strided(team_of(parent), start, stride, size, nullptr, 0, &team);
    });
    return py::make_tuple(rc, address_of(team));
  });
  m.def("team_destroy", [](Address t) { released([&] { shmem_team_destroy(team_of(t)); }); });
  m.def("team_sync",
        [](Address t) { return released([&] { return shmem_team_sync(team_of(t)); }); });

  m.def("broadcastmem", [](Address team, Address dest, Address src, std::size_t bytes, int root) {
    return released([&] {
      return shmem_broadcastmem(team_of(team), at<void>(dest), at<const void>(src), bytes, root);
    });
  });
  m.def("fcollectmem", [](Address team, Address dest, Address src, std::size_t bytes) {
    return released([&] {
      return shmem_fcollectmem(team_of(team), at<void>(dest), at<const void>(src), bytes);
    });
  });
  m.def("alltoallmem", [](Address team, Address dest, Address src, std::size_t bytes) {
    return released([&] {
      return shmem_alltoallmem(team_of(team), at<void>(dest), at<const void>(src), bytes);
    });
  });

  SHMOE_REDUCE_BITWISE_TYPES(SHMOE_PY_REDUCE_BITWISE)
  SHMOE_REDUCE_MINMAX_TYPES(SHMOE_PY_REDUCE_MINMAX)
  SHMOE_REDUCE_ARITH_TYPES(SHMOE_PY_REDUCE_ARITH)
}

}  // namespace shmoe::python
