// Setup, the one agreement of collective calls, the symmetric heap, shmem_ptr, RMA, signals and
// memory ordering. Transfers are by bytes: the element type only matters to atomics and
// reductions (amo.cpp, collectives.cpp).
#include <pybind11/stl.h>
#include <shmem.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::python {
namespace {

// One symmetric allocation, seen by Python through the buffer protocol (numpy arrays over it
// keep it alive). Freed collectively by free(), never by the garbage collector.
struct SymmetricMemory {
  std::byte* data;
  std::size_t size;
};

void agree(const TeamHandle& team, const std::string& call,
           const std::optional<std::string>& refusal,
           const std::vector<std::pair<std::string, std::int64_t>>& values) {
  if (values.size() > SHMOE_AGREE_MAX_VALUES) {
    throw Error(call + ": at most " + std::to_string(SHMOE_AGREE_MAX_VALUES) +
                " values can be agreed on");
  }
  std::int64_t v[SHMOE_AGREE_MAX_VALUES] = {};
  const char* names[SHMOE_AGREE_MAX_VALUES] = {};
  for (std::size_t i = 0; i < values.size(); ++i) {
    names[i] = values[i].first.c_str();
    v[i] = values[i].second;
  }
  const char* why = refusal ? refusal->c_str() : nullptr;
  const int rc = released([&] {
    return shmoe_agree(team.team, call.c_str(), why, v, names, static_cast<int>(values.size()));
  });
  if (rc != 0) throw Error(shmoe_last_error());
}

// Joining and leaving the job, and what the library says of itself.
void bind_setup(py::module_& m) {
  m.def("init", [] {
    int provided = 0;
    // The MoE operators' worker threads call SHMEM themselves.
    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
    return provided;
  });
  // store_apart: the store already runs apart from every PE (shmoe_init_joining); otherwise PE 0
  // runs it (shmoe_init_from).
  m.def("init_from",
        [](int rank, int size, const std::string& store, const std::string& key, bool store_apart) {
          int provided = 0;
          auto init = store_apart ? shmoe_init_joining : shmoe_init_from;
          if (init(rank, size, store.c_str(), key.c_str(), SHMEM_THREAD_MULTIPLE, &provided) != 0) {
            throw Error(shmoe_last_error());
          }
          return provided;
        });
  m.def("finalize", [] { released([] { shmem_finalize(); }); });
  m.def("my_pe", [] { return shmem_my_pe(); });
  m.def("n_pes", [] { return shmem_n_pes(); });
  m.def("info_get_name", [] {
    char name[SHMEM_MAX_NAME_LEN] = {};
    shmem_info_get_name(name);
    return std::string(name);
  });
  m.def("info_get_version", [] {
    int major = 0, minor = 0;
    shmem_info_get_version(&major, &minor);
    return py::make_tuple(major, minor);
  });
}

// Collective calls' agreement and the calls that order and complete memory operations.
void bind_ordering(py::module_& m) {
  m.def("agree", &agree, py::arg("team"), py::arg("call"), py::arg("refusal"),
        py::arg("values") = std::vector<std::pair<std::string, std::int64_t>>{});

  m.def("barrier_all", [] { released([] { shmem_barrier_all(); }); });
  m.def("sync_all", [] { released([] { shmem_sync_all(); }); });
  m.def("quiet", [] { released([] { shmem_quiet(); }); });
  m.def("fence", [] { shmem_fence(); });
}

// The symmetric heap: allocations as buffers, where a buffer lies in one, and peers' copies.
void bind_heap(py::module_& m) {
  py::class_<SymmetricMemory>(m, "SymmetricMemory", py::buffer_protocol())
      .def_buffer([](SymmetricMemory& s) {
        return py::buffer_info(reinterpret_cast<std::uint8_t*>(s.data),
                               static_cast<py::ssize_t>(s.size));
      })
      .def_property_readonly("nbytes", [](const SymmetricMemory& s) { return s.size; });

  // Collective: every PE asks for the same bytes (the package agreed on them); None where the
  // heap has no room (on every PE alike).
  m.def("malloc", [](std::size_t bytes) -> std::optional<SymmetricMemory> {
    // A zero-size array still takes a granule, so that every array has its own address.
    void* p = released([&] { return shmem_malloc(bytes == 0 ? 1 : bytes); });
    if (p == nullptr) return std::nullopt;
    return SymmetricMemory{static_cast<std::byte*>(p), bytes};
  });
  // Collective. `a` starts a live allocation (the package checked it with heap_allocation).
  m.def("free", [](const py::buffer& a) {
    const Bytes b = bytes_of(a, "a");
    released([&] { shmem_free(b.data); });
  });
  // Where `a` lies in a live allocation of the symmetric heap: (its byte offset there, the
  // allocation's size), or None.
  m.def("heap_allocation", [](const py::buffer& a) -> std::optional<py::tuple> {
    const Bytes b = bytes_of(a, "a");
    const auto found = shmoe::heap_allocation(b.data, b.size);
    if (!found) return std::nullopt;
    return py::make_tuple(b.data - static_cast<std::byte*>(found->start), found->size);
  });
  m.def("addr_accessible", [](const py::buffer& a, int pe) {
    return shmem_addr_accessible(bytes_of(a, "a").data, pe) != 0;
  });
  // PE pe's copy of `a` by load and store (a memoryview of its bytes), or None where pe is on
  // another host.
  m.def("peer_view", [](const py::buffer& a, int pe) -> std::optional<py::memoryview> {
    const Bytes b = bytes_of(a, "a");
    void* p = shmem_ptr(b.data, pe);
    if (p == nullptr) return std::nullopt;
    return py::memoryview::from_memory(p, static_cast<py::ssize_t>(b.size));
  });
}

void bind_rma(py::module_& m) {
  m.def("putmem", [](const py::buffer& dest, const py::buffer& src, int pe) {
    const Bytes d = bytes_of(dest, "dest"), s = bytes_of(src, "src");
    if (d.size != s.size) throw Error("putmem: dest and src differ in size");
    released([&] { shmem_putmem(d.data, s.data, d.size, pe); });
  });
  m.def("getmem", [](const py::buffer& dest, const py::buffer& src, int pe) {
    const Bytes d = bytes_of(dest, "dest", true), s = bytes_of(src, "src");
    if (d.size != s.size) throw Error("getmem: dest and src differ in size");
    released([&] { shmem_getmem(d.data, s.data, d.size, pe); });
  });
}

// Put-with-signal, signal reads and waits, and their constants.
void bind_signals(py::module_& m) {
  m.def("putmem_signal", [](const py::buffer& dest, const py::buffer& src, const py::buffer& sig,
                            std::uint64_t value, int op, int pe) {
    const Bytes d = bytes_of(dest, "dest"), s = bytes_of(src, "src");
    auto* signal = reinterpret_cast<std::uint64_t*>(element_of(sig, 0, 8, true));
    if (d.size != s.size) throw Error("putmem_signal: dest and src differ in size");
    released([&] { shmem_putmem_signal(d.data, s.data, d.size, signal, value, op, pe); });
  });
  m.def("signal_fetch", [](const py::buffer& sig) {
    return shmem_signal_fetch(reinterpret_cast<const std::uint64_t*>(element_of(sig, 0, 8, false)));
  });
  m.def("signal_wait_until", [](const py::buffer& sig, int cmp, std::uint64_t value) {
    auto* signal = reinterpret_cast<std::uint64_t*>(element_of(sig, 0, 8, true));
    return released([&] { return shmem_signal_wait_until(signal, cmp, value); });
  });

  m.attr("SIGNAL_SET") = SHMEM_SIGNAL_SET;
  m.attr("SIGNAL_ADD") = SHMEM_SIGNAL_ADD;
  m.attr("CMP_EQ") = SHMEM_CMP_EQ;
  m.attr("CMP_NE") = SHMEM_CMP_NE;
  m.attr("CMP_GT") = SHMEM_CMP_GT;
  m.attr("CMP_GE") = SHMEM_CMP_GE;
  m.attr("CMP_LT") = SHMEM_CMP_LT;
  m.attr("CMP_LE") = SHMEM_CMP_LE;
}

}  // namespace

void bind_core(py::module_& m) {
  bind_setup(m);
  bind_ordering(m);
  bind_heap(m);
  bind_rma(m);
  bind_signals(m);
}

}  // namespace shmoe::python
