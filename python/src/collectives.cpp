// Teams and the team-based collectives. Broadcast, fcollect and alltoall move bytes (their *mem
// forms); the reductions are stamped from the reduction type tables as OP_reduce_TYPENAME, so
// the package finds the types each reduction supports by their names. The package has agreed
// (core.cpp's agree) on every collective's arguments before it calls these.
#include <pybind11/stl.h>
#include <shmem.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "shmoe/type_tables.h"

namespace shmoe::python {
namespace {

template <typename T>
T* typed(const Bytes& b) {
  return reinterpret_cast<T*>(b.data);
}

#define SHMOE_PY_REDUCE(T, N, OP)                                                        \
  m.def((std::string(#OP "_reduce_") + #N).c_str(),                                      \
        [](const TeamHandle& team, const py::buffer& dest, const py::buffer& src) {      \
          const Bytes d = bytes_of(dest, "dest", true), s = bytes_of(src, "src");        \
          if (d.size != s.size) throw Error(#OP "_reduce: dest and src differ in size"); \
          return released([&] {                                                          \
            return shmem_##N##_##OP##_reduce(team.team, typed<T>(d), typed<T>(s),        \
                                             s.size / sizeof(T));                        \
          });                                                                            \
        });
#define SHMOE_PY_REDUCE_BITWISE(T, N) \
  SHMOE_PY_REDUCE(T, N, and) SHMOE_PY_REDUCE(T, N, or) SHMOE_PY_REDUCE(T, N, xor)
#define SHMOE_PY_REDUCE_MINMAX(T, N) SHMOE_PY_REDUCE(T, N, max) SHMOE_PY_REDUCE(T, N, min)
#define SHMOE_PY_REDUCE_ARITH(T, N) SHMOE_PY_REDUCE(T, N, sum) SHMOE_PY_REDUCE(T, N, prod)

}  // namespace

void bind_collectives(py::module_& m) {
  py::class_<TeamHandle>(m, "TeamHandle");
  m.def("team_world", [] { return TeamHandle{SHMEM_TEAM_WORLD}; });
  m.def("team_shared", [] { return TeamHandle{SHMEM_TEAM_SHARED}; });
  m.def("team_my_pe", [](const TeamHandle& t) { return shmem_team_my_pe(t.team); });
  m.def("team_n_pes", [](const TeamHandle& t) { return shmem_team_n_pes(t.team); });
  m.def("team_translate_pe", [](const TeamHandle& from, int pe, const TeamHandle& to) {
    return shmem_team_translate_pe(from.team, pe, to.team);
  });
  // (status, new team): the members get 0 and the team, the others 0 and None; -1 everywhere
  // for a refused split.
  m.def("team_split_strided", [](const TeamHandle& parent, int start, int stride, int size) {
    shmem_team_t team = SHMEM_TEAM_INVALID;
    const int rc = released([&] {
      return shmem_team_split_strided(parent.team, start, stride, size, nullptr, 0, &team);
    });
    std::optional<TeamHandle> made;
    if (team != SHMEM_TEAM_INVALID) made = TeamHandle{team};
    return py::make_tuple(rc, made);
  });
  m.def("team_destroy", [](const TeamHandle& t) { released([&] { shmem_team_destroy(t.team); }); });
  m.def("team_sync",
        [](const TeamHandle& t) { return released([&] { return shmem_team_sync(t.team); }); });

  m.def("broadcastmem", [](const TeamHandle& team, const py::buffer& dest, const py::buffer& src,
                           int root) {
    const Bytes d = bytes_of(dest, "dest", true), s = bytes_of(src, "src");
    return released([&] { return shmem_broadcastmem(team.team, d.data, s.data, s.size, root); });
  });
  m.def("fcollectmem", [](const TeamHandle& team, const py::buffer& dest, const py::buffer& src) {
    const Bytes d = bytes_of(dest, "dest", true), s = bytes_of(src, "src");
    return released([&] { return shmem_fcollectmem(team.team, d.data, s.data, s.size); });
  });
  // Blocks of `block_bytes`.
  m.def("alltoallmem", [](const TeamHandle& team, const py::buffer& dest, const py::buffer& src,
                          std::size_t block_bytes) {
    const Bytes d = bytes_of(dest, "dest", true), s = bytes_of(src, "src");
    return released([&] { return shmem_alltoallmem(team.team, d.data, s.data, block_bytes); });
  });

  SHMOE_REDUCE_BITWISE_TYPES(SHMOE_PY_REDUCE_BITWISE)
  SHMOE_REDUCE_MINMAX_TYPES(SHMOE_PY_REDUCE_MINMAX)
  SHMOE_REDUCE_ARITH_TYPES(SHMOE_PY_REDUCE_ARITH)
}

}  // namespace shmoe::python
