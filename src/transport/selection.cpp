#include "transport/selection.hpp"

#include "common/backoff.hpp"
#include "common/error.hpp"
#include "transport/routed_transport.hpp"
#include "transport/start_record.hpp"
#include "transport/ucx_transport.hpp"

namespace shmoe::transport {
namespace {

std::string encode(const HostIdentity& id) {
  return encode_record(
      [&](Writer& w) { w.str(id.host).str(id.system_host).str(settings::name_of(id.mode)); });
}

struct PeerIdentity {
  std::string host;
  std::string system_host;
  std::string mode;
};

PeerIdentity decode(const std::string& text, int pe) {
  return decode_record(text, pe, "host", [](Reader& r) {
    PeerIdentity p;
    p.host = r.str();
    p.system_host = r.str();
    p.mode = r.str();
    return p;
  });
}

}  // namespace

// Every PE must use the same mode: a PE that maps a peer while the peer expects UCX would wait
// for operations that never come.
PeerPlan plan_peers(bootstrap::StoreCollectives& collectives, int rank, int size,
                    const HostIdentity& me, std::chrono::milliseconds timeout) {
  auto records = collectives.allgather("hosts", encode(me), timeout);
  std::vector<PeerIdentity> peers;
  for (int pe = 0; pe < size; ++pe) peers.push_back(decode(records[pe], pe));
  PeerPlan plan;
  plan.mapped.assign(size, false);
  int other_host_pe = -1;  // the first PE on a host other than PE 0's
  for (int pe = 0; pe < size; ++pe) {
    if (peers[pe].mode != settings::name_of(me.mode)) {
      throw make_error(
          "PE {} has SHMOE_TRANSPORT={} but PE {} has SHMOE_TRANSPORT={}: set the same "
          "value for every PE",
          pe, peers[pe].mode, rank, settings::name_of(me.mode));
    }
    if (other_host_pe < 0 && peers[pe].host != peers[0].host) other_host_pe = pe;
    plan.mapped[pe] = pe == rank || (me.mode != Mode::kUcx && peers[pe].host == me.host);
    if (plan.mapped[pe]) plan.shared_memory_pes.push_back(pe);
    if (peers[pe].system_host == me.system_host) ++plan.pes_sharing_cores;
  }
  const bool spans_hosts = other_host_pe >= 0;
  if (spans_hosts && me.mode == Mode::kShm) {
    throw make_error(
        "SHMOE_TRANSPORT=shm, but PE 0 runs on host '{}' and PE {} on '{}': shared "
        "memory reaches only PEs of one host (use auto or ucx)",
        peers[0].host, other_host_pe, peers[other_host_pe].host);
  }
  plan.use_ucx = size > 1 && (spans_hosts || me.mode == Mode::kUcx);
  return plan;
}

Transports::Transports(bootstrap::StoreCollectives& collectives, int rank, int size,
                       const PeerPlan& plan, heap::SymmetricHeap& heap, const std::string& host,
                       const UcxOptions& ucx, std::chrono::milliseconds timeout) {
  shm_ = std::make_unique<ShmTransport>(collectives, rank, size, heap, host, plan.mapped, timeout);
  active_ = shm_.get();
  if (!plan.use_ucx) return;
  std::vector<bool> remote(size);
  for (int pe = 0; pe < size; ++pe) remote[pe] = !plan.mapped[pe];
  ucx_ = std::make_unique<UcxTransport>(collectives, rank, size, heap.base(), shm_->window_size(),
                                        remote, timeout, ucx);
  std::vector<int> route(size);
  for (int pe = 0; pe < size; ++pe) route[pe] = plan.mapped[pe] ? 0 : 1;
  routed_ = std::make_unique<RoutedTransport>(std::move(route),
                                              std::vector<Transport*>{shm_.get(), ucx_.get()});
  active_ = routed_.get();
  set_wait_progress(&Transports::drive, &Transports::sleep_until_event, this);
}

void Transports::drive(void* self) {
  static_cast<Transports*>(self)->active_->progress();
}

void Transports::sleep_until_event(void* self, std::chrono::microseconds at_most) {
  static_cast<Transports*>(self)->ucx_->sleep_until_event(at_most);
}

// UCX lets go of the segment before the shared-memory transport unmaps it.
Transports::~Transports() {
  if (ucx_) set_wait_progress(nullptr, nullptr, nullptr);
  routed_.reset();
  ucx_.reset();
}

}  // namespace shmoe::transport
