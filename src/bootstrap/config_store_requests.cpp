// The config store's requests, one handler per message kind, for connections that proved the
// job key; and the limits every write is held to.
#include "bootstrap/config_store_server_impl.hpp"

namespace shmoe::bootstrap {

// Requests before the hello are refused; after it each opcode has its handler.
void ConfigStoreServer::Impl::handle(Conn& c, std::uint8_t code, std::string_view payload) {
  using Handler = void (Impl::*)(Conn&, wire::Reader&);
  // Indexed by opcode (kHello = 1 .. kWatch).
  static constexpr Handler kHandlers[] = {
      nullptr,          &Impl::on_second_hello, &Impl::on_set,   &Impl::on_get,
      &Impl::on_add,    &Impl::on_append,       &Impl::on_cas,   &Impl::on_remove,
      &Impl::on_status, &Impl::on_bye,          &Impl::on_watch,
  };
  static_assert(std::size(kHandlers) == static_cast<std::size_t>(Op::kWatch) + 1);
  if (code < static_cast<std::uint8_t>(Op::kHello) ||
      code > static_cast<std::uint8_t>(Op::kWatch)) {
    throw wire::WireError(fmt::format("unknown opcode {}", code));
  }
  wire::Reader r(payload);
  if (!c.greeted) {
    if (static_cast<Op>(code) == Op::kHello) {
      on_hello(c, r, payload);
    } else {
      refuse_and_drop(c, fmt::format("a request (opcode {}) before the hello that proves the "
                                     "job key: the connection must say hello first",
                                     code));
    }
    return;
  }
  (this->*kHandlers[code])(c, r);
}

// A second hello on a proven connection.
void ConfigStoreServer::Impl::on_second_hello(Conn& c, wire::Reader&) {
  refuse(c, "this connection already said hello");
  return;
}

// SET key value.
void ConfigStoreServer::Impl::on_set(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  std::string_view value = r.str();
  r.expect_end();
  if (!may_write(c, "SET", key) || !within_limits(c, "SET", key, value.size())) return;
  // The first abort explains the failure; later ones are mostly its consequences.
  if (key != kAbortKey || !kv.contains(key)) publish(key, std::string(value));
  reply_status(c, Status::kOk);
  return;
}

// GET key timeout: at once if the key has a value, else parked until it has one (or the timeout).
void ConfigStoreServer::Impl::on_get(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  std::int64_t timeout_ms = r.i64();
  r.expect_end();
  if (auto it = kv.find(key); it != kv.end()) {
    wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
    w.str(it->second);
    reply(c, w);
  } else if (timeout_ms == 0) {
    reply_status(c, Status::kTimeout);
  } else {
    c.parked = true;
    c.parked_key = key;
    c.deadline.reset();
    // Beyond a year is as good as forever, and Clock::now() + it could overflow.
    if (timeout_ms > 0 && timeout_ms < kForeverMs) {
      c.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    waiters[key].push_back(c.id);
  }
  return;
}

// ADD key delta on an integer value (absent: 0); replies with the sum.
void ConfigStoreServer::Impl::on_add(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  std::int64_t delta = r.i64();
  r.expect_end();
  if (!may_write(c, "ADD", key)) return;
  std::int64_t current = 0;
  if (auto it = kv.find(key); it != kv.end()) {
    const std::string& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
    if (ec != std::errc() || end != v.data() + v.size()) {
      refuse(c, fmt::format("ADD on key '{}' whose value is not an integer", key));
      return;
    }
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    refuse(c, fmt::format("ADD of {} to key '{}' ({}) overflows", delta, key, current));
    return;
  }
  std::string text = std::to_string(result);
  if (!within_limits(c, "ADD", key, text.size())) return;
  publish(key, std::move(text));
  wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
  w.i64(result);
  reply(c, w);
  return;
}

// APPEND key value.
void ConfigStoreServer::Impl::on_append(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  std::string_view value = r.str();
  r.expect_end();
  if (!may_write(c, "APPEND", key)) return;
  auto it = kv.find(key);
  const std::size_t before = it == kv.end() ? 0 : it->second.size();
  if (!within_limits(c, "APPEND", key, before + value.size())) return;
  append(key, value);
  reply_status(c, Status::kOk);
  return;
}

// CAS key [expected] desired: replies with whether it matched and what was there.
void ConfigStoreServer::Impl::on_cas(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  bool has_expected = r.u8() != 0;
  std::string_view expected = r.str();
  std::string_view desired = r.str();
  r.expect_end();
  if (!may_write(c, "CAS", key)) return;
  auto it = kv.find(key);
  bool present = it != kv.end();
  bool match = has_expected ? (present && it->second == expected) : !present;
  if (match && !within_limits(c, "CAS", key, desired.size())) return;
  wire::Writer w(static_cast<std::uint8_t>(match ? Status::kOk : Status::kCasFailed));
  w.u8(present ? 1 : 0).str(present ? std::string_view(it->second) : std::string_view());
  if (match) publish(key, std::string(desired));
  reply(c, w);
  return;
}

// REMOVE key.
void ConfigStoreServer::Impl::on_remove(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  r.expect_end();
  if (!may_write(c, "REMOVE", key)) return;
  reply_status(c, erase(key) ? Status::kOk : Status::kNotFound);
  return;
}

// STATUS: the job's arrivals, departures and the store's trouble.
void ConfigStoreServer::Impl::on_status(Conn& c, wire::Reader& r) {
  r.expect_end();
  const JobStatus s = job.status(store_trouble);
  wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
  w.i32(s.size).u32(static_cast<std::uint32_t>(s.arrived.size()));
  for (auto rank : s.arrived) w.i32(rank);
  w.u32(static_cast<std::uint32_t>(s.departed.size()));
  for (auto rank : s.departed) w.i32(rank);
  w.str(s.store_trouble);
  reply(c, w);
  return;
}

// BYE: a PE that finalizes says so before it closes.
void ConfigStoreServer::Impl::on_bye(Conn& c, wire::Reader& r) {
  r.expect_end();
  if (c.hello.role == PeerRole::kPe && !c.said_bye) {
    c.said_bye = true;
    if (job.depart(c.hello.rank) && !kv.contains(std::string(kFinalizedKey))) {
      publish(std::string(kFinalizedKey), "1");
    }
  }
  reply_status(c, Status::kOk);
  return;
}

// WATCH key: one event once the key has a value.
void ConfigStoreServer::Impl::on_watch(Conn& c, wire::Reader& r) {
  std::string key(r.str());
  r.expect_end();
  if (!within_limits(c, "WATCH", key, 0)) return;
  if (c.pending_watches >= kMaxWatchesPerConnection) {
    refuse_and_drop(c, fmt::format("WATCH of a key beyond the {} pending watches a "
                                   "connection may hold",
                                   kMaxWatchesPerConnection));
    return;
  }
  reply_status(c, Status::kOk);
  if (auto it = kv.find(key); it != kv.end()) {
    push_event(c, key, it->second);
  } else {
    watchers[key].push_back(c.id);
    ++c.pending_watches;
  }
  return;
}

// Whether a client may change `key`: the lost PEs' keys are the server's alone (a PE that wrote
// them could stop the others' waits for a PE that is alive). Refused with a message otherwise.
bool ConfigStoreServer::Impl::may_write(Conn& c, std::string_view op, const std::string& key) {
  if (!is_server_only_key(key)) return true;
  refuse(c, fmt::format("{} of key '{}': the keys under '{}' are written only by the config store",
                        op, printable(key), kLostKey));
  return false;
}

// Whether `key` may hold a value of `new_value_size` bytes; if not, the request is refused and
// the connection dropped, with a message that names the sizes and the limit.
bool ConfigStoreServer::Impl::within_limits(Conn& c, std::string_view op, const std::string& key,
                                            std::size_t new_value_size) {
  const StoreLimits& limits = opt.limits;
  std::string why;
  if (key.size() > limits.max_value) {
    why = fmt::format(
        "{} with a key of {} bytes, over the limit of {} bytes per key or value "
        "(SHMOE_STORE_MAX_VALUE)",
        op, key.size(), limits.max_value);
  } else if (new_value_size > limits.max_value) {
    why = fmt::format(
        "{} would make the value of key '{}' {} bytes, over the limit of {} bytes "
        "per value (SHMOE_STORE_MAX_VALUE)",
        op, printable(key), new_value_size, limits.max_value);
  } else {
    auto it = kv.find(key);
    const std::size_t old = it == kv.end() ? 0 : entry_bytes(key.size(), it->second.size());
    const std::size_t total = stored_bytes - old + entry_bytes(key.size(), new_value_size);
    if (total > limits.max_total) {
      why = fmt::format(
          "{} of key '{}' ({} bytes) would make the store hold {} bytes, over its "
          "limit of {} bytes (SHMOE_STORE_MAX_TOTAL)",
          op, printable(key), new_value_size, total, limits.max_total);
    }
  }
  if (why.empty()) return true;
  refuse_and_drop(c, why);
  return false;
}

}  // namespace shmoe::bootstrap
