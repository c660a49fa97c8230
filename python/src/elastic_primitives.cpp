// PP, AGRS and Engram (shmoe/elastic_primitives.h) as methods of _shmoe.ElasticBuffer, for the
// package's deep_ep.ElasticBuffer (elastic_primitives.py). Tensors come as the package converts
// them, (numpy view, torch dtype name) pairs (ep_arrays.hpp); each method makes one C call. An
// argument that cannot be read refuses a collective call on every PE (its `refusal`) and a
// one-sided call on this PE.
#include "shmoe/elastic_primitives.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "ep_arrays.hpp"

namespace shmoe::python {
namespace {

// A one-sided call's tensor: refused here when it cannot be read.
shmoe_tensor_t readable(Converted& c, const py::tuple& pair, const char* name) {
  py::dict d;
  d[name] = pair;
  const shmoe_tensor_t t = c.tensor(d, name);
  if (c.refusal() != nullptr) throw Error(c.refusal(), SHMOE_MOE_REFUSED);
  return t;
}

// `bytes` bytes at `p` of the runtime's symmetric memory, as a numpy array that keeps `owner`.
py::array bytes_at(void* p, std::int64_t bytes, const py::object& owner) {
  return py::array(py::dtype("uint8"), {static_cast<py::ssize_t>(bytes)}, {py::ssize_t{1}}, p,
                   owner);
}

void pp_set_config(const py::object& self, std::int64_t bytes, int inflight) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  released([&] { check(shmoe_elastic_pp_set_config(b, bytes, inflight)); });
}

void pp_send(const py::object& self, const py::tuple& t, int dst) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  Converted c;
  const shmoe_tensor_t x = readable(c, t, "t");
  released([&] { check(shmoe_elastic_pp_send(b, &x, dst)); });
}

void pp_recv(const py::object& self, const py::tuple& t, int src) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  Converted c;
  const shmoe_tensor_t x = readable(c, t, "t");
  released([&] { check(shmoe_elastic_pp_recv(b, &x, src)); });
}

void agrs_set_config(const py::object& self, std::int64_t bytes, int calls) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  released([&] { check(shmoe_elastic_agrs_set_config(b, bytes, calls)); });
}

std::vector<py::array> agrs_inplace(const py::object& self,
                                    const std::vector<std::int64_t>& bytes) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  std::vector<void*> places(bytes.size());
  check(shmoe_elastic_agrs_inplace_tensors(b, bytes.data(), static_cast<int>(bytes.size()),
                                           places.data()));
  std::vector<py::array> out;
  for (std::size_t i = 0; i < bytes.size(); ++i) out.push_back(bytes_at(places[i], bytes[i], self));
  return out;
}

// (each tensor's gathered region as bytes, the ticket (session, call) to wait for).
py::tuple all_gather(const py::object& self, const std::vector<py::tuple>& tensors) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  Converted c;
  std::vector<shmoe_tensor_t> ts;
  for (const py::tuple& t : tensors) ts.push_back(readable(c, t, "t"));
  std::vector<void*> gathered(ts.size());
  shmoe_elastic_agrs_ticket_t ticket{};
  released([&] {
    check(shmoe_elastic_agrs_all_gather(b, ts.data(), static_cast<int>(ts.size()), gathered.data(),
                                        &ticket));
  });
  int ranks[2] = {0, 0};
  check(shmoe_elastic_buffer_domain_size(b, 0, ranks));
  py::list out;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto bytes = static_cast<std::int64_t>(tensors[i][0].cast<py::array>().nbytes());
    out.append(bytes_at(gathered[i], bytes * ranks[0] * ranks[1], self));
  }
  return py::make_tuple(out, py::make_tuple(ticket.session, ticket.call));
}

void agrs_wait(const py::object& self, std::uint64_t session, int call) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  released([&] { check(shmoe_elastic_agrs_wait(b, {session, call})); });
}

void engram_write(const py::object& self, const py::dict& t) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  Converted c;
  shmoe_elastic_engram_write_args_t a{};
  a.struct_size = sizeof a;
  a.storage = c.tensor(t, "storage");
  a.sf = c.tensor(t, "sf");
  a.refusal = c.refusal();
  released([&] { check(shmoe_elastic_engram_write(b, &a)); });
}

py::object engram_fetch(const py::object& self, const py::tuple& indices, bool col_major_sf) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  Converted c;
  const shmoe_tensor_t idx = readable(c, indices, "indices");
  shmoe_ep_result_t r = nullptr;
  released([&] { check(shmoe_elastic_engram_fetch(b, &idx, col_major_sf ? 1 : 0, &r)); });
  return py::cast(std::make_unique<EpResult>(r));
}

py::dict engram_fetch_wait(const py::object& self, const py::object& fetched) {
  shmoe_elastic_buffer_t b = elastic_buffer_of(self);
  shmoe_ep_result_t r = fetched.cast<const EpResult&>().get();
  released([&] { check(shmoe_elastic_engram_fetch_wait(b, r)); });
  return arrays_of(fetched);
}

std::uint64_t agrs_session_bytes(int num_ranks, const std::vector<std::int64_t>& bytes) {
  std::uint64_t out = 0;
  check(shmoe_elastic_agrs_session_bytes(num_ranks, bytes.data(), static_cast<int>(bytes.size()),
                                         &out));
  return out;
}

// Adds `f` to the class `cls` as the method `name`.
template <typename F, typename... Extra>
void method(py::object& cls, const char* name, F&& f, const Extra&... extra) {
  cls.attr(name) = py::cpp_function(std::forward<F>(f), py::name(name), py::is_method(cls),
                                    py::sibling(py::getattr(cls, name, py::none())), extra...);
}

}  // namespace

void bind_elastic_primitives(py::module_& m) {
  py::object cls = m.attr("ElasticBuffer");
  method(cls, "pp_set_config", &pp_set_config, py::arg("num_max_tensor_bytes"),
         py::arg("num_max_inflight_tensors"));
  method(cls, "pp_send", &pp_send, py::arg("t"), py::arg("dst_rank_idx"));
  method(cls, "pp_recv", &pp_recv, py::arg("t"), py::arg("src_rank_idx"));
  method(cls, "agrs_set_config", &agrs_set_config, py::arg("num_max_session_bytes"),
         py::arg("num_max_all_gathers_per_session"));
  method(cls, "create_agrs_session", [](const py::object& self) {
    check(shmoe_elastic_agrs_create_session(elastic_buffer_of(self)));
  });
  method(cls, "destroy_agrs_session", [](const py::object& self) {
    shmoe_elastic_buffer_t b = elastic_buffer_of(self);
    released([&] { check(shmoe_elastic_agrs_destroy_session(b)); });
  });
  method(cls, "agrs_get_inplace_tensor", &agrs_inplace, py::arg("num_bytes_list"));
  method(cls, "all_gather", &all_gather, py::arg("tensors"));
  method(cls, "agrs_wait", &agrs_wait, py::arg("session"), py::arg("call"));
  method(cls, "engram_write", &engram_write, py::arg("tensors"));
  method(cls, "engram_fetch", &engram_fetch, py::arg("indices"),
         py::arg("use_tma_aligned_col_major_sf"));
  method(cls, "engram_fetch_wait", &engram_fetch_wait, py::arg("fetched"));

  m.def(
      "elastic_pp_buffer_size_hint",
      [](std::int64_t bytes, int inflight) {
        std::uint64_t out = 0;
        check(shmoe_elastic_pp_buffer_size_hint(bytes, inflight, &out));
        return out;
      },
      py::arg("num_max_tensor_bytes"), py::arg("num_max_inflight_tensors"));
  m.def("elastic_agrs_session_bytes", &agrs_session_bytes, py::arg("num_ranks"),
        py::arg("tensor_bytes"));
  m.def(
      "elastic_agrs_buffer_size_hint",
      [](std::uint64_t session_bytes) {
        std::uint64_t out = 0;
        check(shmoe_elastic_agrs_buffer_size_hint(session_bytes, &out));
        return out;
      },
      py::arg("num_max_session_bytes"));
  m.def(
      "elastic_engram_storage_size_hint",
      [](std::int64_t entries, int hidden, std::int64_t tokens, int element_bytes) {
        std::uint64_t out[2] = {0, 0};
        check(shmoe_elastic_engram_storage_size_hint(entries, hidden, tokens, element_bytes, out));
        return std::make_pair(out[0], out[1]);
      },
      py::arg("num_entries"), py::arg("hidden"), py::arg("num_max_tokens_per_rank"),
      py::arg("element_bytes"));
}

}  // namespace shmoe::python
