// The pieces of the MoE protocol that every operator shares: the layout of the symmetric window,
// generation-stamped flags, and the exchange of per-call headers (token counts, parameters, input
// errors) that starts each call.
//
// Flags are never reset. Each operator keeps a generation counter, the same on every PE because
// calls are collective; a flag is raised by storing the generation and waited on with ">=".
// A PE's entry into call g is itself a signal that it is done with call g-1's buffers, which is
// what lets the next call reuse every buffer without a host-side reset.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shmoe::moe {

// Lays out a symmetric window part by part, each part cache-line aligned.
class WindowLayout {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t at = total_;
    total_ += (bytes + 63) / 64 * 64;
    return at;
  }
  std::size_t total() const { return total_; }

 private:
  std::size_t total_ = 0;
};

// How long this PE waited for each source PE's flags during one operator call, in microseconds
// summed over the call's steps (from the start of a step's wait to the source's flag seen): the
// PE that holds everyone up is the one every other PE waited for (the slow-rank report).
class SourceWaits {
 public:
  explicit SourceWaits(int n_pes) : us_(static_cast<std::size_t>(n_pes), 0.0) {}
  void add(int src, double us) { us_[static_cast<std::size_t>(src)] += us; }
  const std::vector<double>& us() const { return us_; }

 private:
  std::vector<double> us_;
};

struct ShrinkWords;

// Shrink mode's view of the job for one call: the caller's PE mask (nonzero = masked), which the
// call neither sends to nor waits for, and the bound on every wait for a live PE, past which the
// PEs still missing are masked (in the caller's array) and the call goes on without them. A
// default LiveSet is shrink mode off: every PE is live and waits are unbounded (the hang report
// ends them). Only a call's control thread masks; the other workers read after a barrier.
class LiveSet {
 public:
  LiveSet() = default;
  // `words`: the buffer's ShrinkWords, or null for waits that neither share masks nor tell
  // stopped PEs from held ones.
  LiveSet(std::int32_t* mask, std::chrono::milliseconds bound, const ShrinkWords* words = nullptr)
      : mask_(mask), bound_(bound), words_(words) {}
  bool bounded() const { return mask_ != nullptr; }
  bool live(int pe) const { return mask_ == nullptr || mask_[pe] == 0; }
  std::chrono::milliseconds bound() const { return bound_; }
  // Masks `pe`, saying on stderr which step of which call it missed (and `why`, when not just
  // the bound), and tells the live PEs (ShrinkWords).
  void mask(int pe, const std::string& step, std::uint64_t g, const std::string& why = "") const;
  // With ShrinkWords: moves this PE's beat (every bounded wait does, as it polls) ...
  void beat() const;
  // ... whether a live PE told this one it masked `pe` ...
  bool masked_elsewhere(int pe) const;
  // ... and whether `pe`, past the bound, is alive and itself held in a bounded wait: its beat,
  // read twice a sixteenth of the bound apart, moved (a PE on another host is read by gets given
  // up on at a quarter of the bound: one stopped there answers none).
  bool held_in_a_wait(int pe) const;

 private:
  std::int32_t* mask_ = nullptr;
  std::chrono::milliseconds bound_{0};
  const ShrinkWords* words_ = nullptr;
};

// One 64-bit flag per source PE, each on its own cache line, inside the symmetric window.
class FlagArray {
 public:
  FlagArray() = default;
  FlagArray(std::byte* base, int n_pes) : base_(base), n_(n_pes) {}
  static std::size_t bytes(int n_pes) { return static_cast<std::size_t>(n_pes) * kStride; }
  int size() const { return n_; }

  std::uint64_t* slot(int src) const {
    return reinterpret_cast<std::uint64_t*>(base_ + static_cast<std::size_t>(src) * kStride);
  }
  // Sets flag `src` at PE `pe` to `generation` (release: everything this thread stored before,
  // and everything ordered before it by a barrier and a store fence, is visible first).
  void raise(int pe, int src, std::uint64_t generation) const;
  // The same, once `bytes` of `data` put at `dest` (symmetric) on PE `pe` have landed there: the
  // flag is held back (shmem_putmem_signal), and this PE does not wait for it. Shrink mode raises
  // flags so, with no fence before, since a PE stopped on another host answers no fence.
  void raise_after(int pe, int src, std::uint64_t generation, void* dest = nullptr,
                   const void* data = nullptr, std::size_t bytes = 0) const;

  // The step that starts and ends the operators' phases, in two halves for callers that raise on
  // one thread and wait on several: my flag (`me`) to `generation` at every (live) PE ...
  void raise_at_every_pe(int me, std::uint64_t generation, const LiveSet& live = {}) const;
  // ... or, in shrink mode, each held until what this PE put there before has landed (by any of
  // its threads, ordered before by a barrier): the fence that raise_at_every_pe needs first
  // would wait for every PE, stopped ones too.
  void raise_held_at_every_pe(int me, std::uint64_t generation, const LiveSet& live) const;
  // ... and every (live) PE's flag here at `generation` (all polled at once, so that `waits`,
  // when given, gets how long each source took; in shrink mode those still missing at the bound
  // are masked).
  void wait_for_every_pe(std::uint64_t generation, const std::string& what,
                         SourceWaits* waits = nullptr, const LiveSet& live = {}) const;
  // Both halves: returns once every (live) PE has reached this step of call `generation`.
  void all_reach(int me, std::uint64_t generation, const std::string& what,
                 SourceWaits* waits = nullptr, const LiveSet& live = {}) const {
    raise_at_every_pe(me, generation, live);
    wait_for_every_pe(generation, what, waits, live);
  }

  // Shrink mode's sync_live and rejoin, whose flags carry the attempt they belong to: arrived(a)
  // says "here for attempt a", left_without(a) "ended attempt a without you" (written at each PE
  // the attempt masked). A flag of another attempt is never an arrival (so one left by an
  // attempt that a stop interrupted cannot pass for a later one), and a PE that comes to an
  // attempt the others ended without it masks them at once. Returns once every live PE came.
  static std::uint64_t arrived(std::uint64_t a) { return 2 * a; }
  static std::uint64_t left_without(std::uint64_t a) { return 2 * a + 1; }
  // With `row`, `bytes` of it (a symmetric address) go to every PE with my arrival, which is held
  // until they land there (raise_after), as are the "ended without you" flags after it.
  void meet(int me, std::uint64_t attempt, const std::string& what, const LiveSet& live,
            void* row = nullptr, std::size_t bytes = 0) const;
  // The attempt that a PE whose last one was `last` joins: the next, or a later one that the
  // flags here show another PE is in (or ended without this PE: then the one after it).
  std::uint64_t next_attempt(std::uint64_t last) const;

 private:
  static constexpr std::size_t kStride = 64;
  std::byte* base_ = nullptr;
  int n_ = 0;
};

// Shrink mode's words in a buffer's window that its waits share with the other PEs. Views of a
// PE stopped on another host differ (what it sent last may reach some PEs only), so one PE may
// wait for it a step later than another, up to a bound longer: a PE that masks it tells the live
// PEs (`masked`), which then mask it at once, and a PE past its bound for a PE that is held in a
// wait itself (its `beat` moves) gives it one more bound rather than mask a live PE.
struct ShrinkWords {
  std::uint64_t* beat = nullptr;  // this PE's (symmetric), moved as its bounded waits poll
  FlagArray masked;               // slot X: epoch + 1 once a live PE masked PE X in this epoch
  std::uint64_t epoch = 0;        // rejoins made (the same on every PE that made them)
  int me = 0;
};

// A step in which every PE tells every PE whether it refuses call g (and a small mode value),
// and learns the same list of refusing PEs (and modes) as every other PE. Its flags hold
// 256g + 2 mode + (refused), in two parities (call g uses parity g % 2): a PE that refuses call
// g returns at once and may start call g + 1, but its flag of g + 1 lands in the other parity,
// and it cannot reach call g + 2 (same parity) before every PE has raised g + 1, i.e. read its
// flags of g. So a flag read for call g is always g's.
class Agreement {
 public:
  Agreement() = default;
  // `base` points at bytes(n_pes) bytes of the symmetric window.
  Agreement(std::byte* base, int n_pes);
  static std::size_t bytes(int n_pes) { return 2 * FlagArray::bytes(n_pes); }

  // Raises my verdict on call g at every PE and waits for everyone's; returns the PEs that
  // refuse, ascending (the same list on every PE). Past it, no PE still reads my buffers of
  // call g - 1 (as after FlagArray::all_reach).
  // `mode` (0..127) goes along; where `modes` is not null it gets every PE's, by PE.
  // `waits`, when given, gets how long each PE's verdict took.
  // In shrink mode (`live` bounded) only live PEs take part; a masked PE's mode reads as mine.
  std::vector<int> agree(std::uint64_t g, int me, bool refuse, const std::string& what,
                         int mode = 0, std::vector<int>* modes = nullptr,
                         SourceWaits* waits = nullptr, const LiveSet& live = {}) const;

 private:
  FlagArray flags_[2];
  int n_ = 0;
};

// One dispatched row's side-band: where it came from and its routing weight.
struct RowMeta {
  std::int32_t src_pe;
  std::int32_t token;
  std::int32_t slot;
  float scale;
};

// What a PE found wrong with its own inputs, told to every PE in its call header.
enum class InputError : std::int32_t {
  kNone = 0,
  kExpertOutOfRange = 1,  // error_index = (token, slot, value)
  kBsOutOfRange = 2,      // error_index = (bs, max_bs)
  kNullTensor = 3,        // error_index[0] = a Tensor
  kCallerRefused = 4,     // the caller found its own inputs wrong (its own error says why)
  kCallerRetry = 5,       // not an error: the caller needs another operator; every PE retries
  kRecvBlock = 6,         // no receive block for the call: error_index = (RecvBlockError, blocks)
};

// Why a dispatch that asked for a receive block got none.
enum class RecvBlockError : std::int32_t { kNoBlocks = 0, kAllHeld = 1, kRecvXToo = 2 };

// The tensors an operator's call header can name as null.
enum class Tensor : std::int32_t {
  kX,
  kExpertIds,
  kRoutingWeights,
  kY,
  kExpandX,
  kAssistInfo,
  kEpRecvCount,
  kExpertTokenNums,
  kExpertTokenCounts,
  kTokenSide,
  kHeaderInts,
  kRecvBlockX,
};
const char* tensor_name(Tensor t);

// The header every PE sends every PE at the start of dispatch and MegaMoE: what it will send
// where, the parameters it was called with, and any error it found in its inputs.
struct CallHeader {
  InputError error = InputError::kNone;
  std::int32_t error_index[3] = {0, 0, 0};
  // dtype: the operator's element type code (DType for dispatch, numeric::Fp8Format for
  // MegaMoE); it is only compared between PEs of one operator.
  std::int32_t hidden = 0, topk = 0, experts_per_pe = 0, dtype = 0;
  std::int32_t bs = 0;
  std::int32_t ffn = 0;  // MegaMoE's ffn_dim; 0 for dispatch
  // Dispatch: the receive block this PE's rows of the call go to, or -1 for its receive window.
  std::int32_t recv_block = -1;
  // MegaMoE: the rows of this PE's waves (each PE resolves its own), which senders count by.
  std::int32_t wave_rows = 0;
  std::int32_t reserved[4] = {};
  // followed by n_pes * experts_per_pe int32 counts: rows for (destination PE, local expert),
  // then the caller's own header ints (dispatch's config.header_ints)
};
static_assert(sizeof(CallHeader) == 64);

// Marks the header as refusing the call because tensor `which` is null.
void refuse_null(CallHeader& h, Tensor which);

// The header exchange that starts a call: two parities of header rows (call g uses parity g % 2,
// so a PE that starts call g+1 never overwrites a header a slower PE still reads for call g) and
// their flags, inside the caller's symmetric window.
class HeaderExchange {
 public:
  HeaderExchange() = default;
  // `base` points at bytes(n_pes, experts_per_pe, caller_ints) bytes of the symmetric window.
  HeaderExchange(std::byte* base, int n_pes, int experts_per_pe, int caller_ints = 0);
  static std::size_t bytes(int n_pes, int experts_per_pe, int caller_ints = 0);

  // My header row of call g, to fill in before exchange(); its counts are [dst * L + expert].
  CallHeader* mine(std::uint64_t g, int me) const { return header(parity(g), me); }
  std::int32_t* counts(std::uint64_t g, int src) const {
    return reinterpret_cast<std::int32_t*>(header(parity(g), src) + 1);
  }
  // PE src's caller ints of call g, after its counts.
  std::int32_t* caller_ints(std::uint64_t g, int src) const {
    return counts(g, src) + static_cast<std::size_t>(n_) * experts_per_pe_;
  }
  // Puts my filled-in header to every (live) PE, then waits for everyone's (timed into `waits`
  // when given); returns them by source PE, null for a PE masked in shrink mode.
  std::vector<const CallHeader*> exchange(std::uint64_t g, int me, const std::string& what,
                                          SourceWaits* waits = nullptr,
                                          const LiveSet& live = {}) const;

 private:
  static int parity(std::uint64_t g) { return static_cast<int>(g % 2); }
  CallHeader* header(int parity, int src) const {
    return reinterpret_cast<CallHeader*>(rows_[parity] + static_cast<std::size_t>(src) * stride_);
  }
  std::byte* rows_[2] = {};
  FlagArray flags_[2];
  std::size_t stride_ = 0;  // one header, its counts and caller ints, cache-line rounded
  int n_ = 0, experts_per_pe_ = 0;
};

// Turns the headers of all PEs into the first error, if any (the same text on every PE). A
// kCallerRetry header is not an error: see any_retry. Null headers (masked PEs) are skipped.
// `bs_name` and `limit_name` say what the token count and its limit are called in this operator.
std::string first_call_error(const char* op, const std::vector<const CallHeader*>& headers,
                             int my_pe, int n_experts, int max_bs,
                             const char* bs_name = "num_tokens",
                             const char* limit_name = "the buffer's max_tokens_per_pe");
// Whether some PE's header asks every PE to retry the call (after first_call_error found none).
bool any_retry(const std::vector<const CallHeader*>& headers);

}  // namespace shmoe::moe
