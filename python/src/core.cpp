// Setup, the symmetric heap, shmem_ptr, RMA, signals and memory ordering. Transfers are by bytes:
// the element type only matters to atomics and reductions (amo.cpp, collectives.cpp).
#include <shmem.h>

#include <string>

#include "bindings.hpp"

namespace shmoe::python {

void bind_core(py::module_& m) {
  m.def("init", [] {
    int provided = 0;
    // The MoE operators' worker threads call SHMEM themselves.
    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
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

  m.def("barrier_all", [] { released([] { shmem_barrier_all(); }); });
  m.def("sync_all", [] { released([] { shmem_sync_all(); }); });
  m.def("quiet", [] { released([] { shmem_quiet(); }); });
  m.def("fence", [] { shmem_fence(); });

  // 0 where the heap has no room (on every PE alike: the call is collective).
  m.def("malloc", [](std::size_t bytes) {
    return released([&] { return reinterpret_cast<Address>(shmem_malloc(bytes)); });
  });
  m.def("free", [](Address a) { released([&] { shmem_free(at<void>(a)); }); });
  m.def("addr_accessible",
        [](Address a, int pe) { return shmem_addr_accessible(at<const void>(a), pe) != 0; });
  m.def("ptr",
        [](Address a, int pe) { return reinterpret_cast<Address>(shmem_ptr(at<void>(a), pe)); });

  m.def("putmem", [](Address dest, Address src, std::size_t bytes, int pe) {
    released([&] { shmem_putmem(at<void>(dest), at<const void>(src), bytes, pe); });
  });
  m.def("getmem", [](Address dest, Address src, std::size_t bytes, int pe) {
    released([&] { shmem_getmem(at<void>(dest), at<const void>(src), bytes, pe); });
  });
  m.def("putmem_signal", [](Address dest, Address src, std::size_t bytes, Address sig,
                            std::uint64_t value, int op, int pe) {
    released([&] {
      shmem_putmem_signal(at<void>(dest), at<const void>(src), bytes, at<std::uint64_t>(sig), value,
                          op, pe);
    });
  });
  m.def("signal_fetch",
        [](Address sig) { return shmem_signal_fetch(at<const std::uint64_t>(sig)); });
  m.def("signal_wait_until", [](Address sig, int cmp, std::uint64_t value) {
    return released([&] { return shmem_signal_wait_until(at<std::uint64_t>(sig), cmp, value); });
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

}  // namespace shmoe::python
