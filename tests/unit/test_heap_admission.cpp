// The admission of symmetric heaps (heap/shm_admission.hpp) and the amounts it prints: a heap of
// 0 bytes or beyond the machine's memory is refused naming the variable and the range; segments
// of the host's PEs beyond /dev/shm's free space are refused naming both, and what fits.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "common/bytes.hpp"
#include "common/error.hpp"
#include "common/memory_info.hpp"
#include "heap/shm_admission.hpp"

namespace shmoe {
namespace {

// The message of the shmoe::Error `f` throws; fails the test if it throws none.
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing was refused";
  return {};
}

TEST(Bytes, HumanText) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.0 KiB");
  EXPECT_EQ(human_bytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(human_bytes(3ull << 29), "1.5 GiB");
  EXPECT_EQ(human_bytes(1ull << 40), "1.0 TiB");
  EXPECT_EQ(human_bytes(std::numeric_limits<std::uint64_t>::max()), "16.0 EiB");
}

TEST(Bytes, SaturatingArithmetic) {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(saturating_mul(1ull << 40, 64), 1ull << 46);
  EXPECT_EQ(saturating_mul(1ull << 40, 1ull << 40), kMax);
  EXPECT_EQ(saturating_mul(0, kMax), 0u);
  EXPECT_EQ(saturating_add(kMax - 1, 1), kMax);
  EXPECT_EQ(saturating_add(kMax, 5), kMax);
  EXPECT_EQ(saturating_add(2, 3), 5u);
}

TEST(MemoryInfo, ReadsThisMachine) {
  const std::uint64_t memory = physical_memory_bytes();
  EXPECT_GT(memory, 64ull << 20);
  const auto available = available_memory_bytes();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, 0u);
  EXPECT_LE(*available, memory + (1ull << 30));  // MemAvailable counts a little beyond MemTotal
  const auto shm = file_system_space(kShmDir);
  ASSERT_TRUE(shm.has_value());
  EXPECT_LE(shm->free, shm->total);
  EXPECT_FALSE(file_system_space("/nonexistent/dir").has_value());
}

TEST(HeapAdmission, HeapSizeMustBeOneByteToTheMachinesMemory) {
  EXPECT_NO_THROW(heap::check_heap_size({"SHMEM_SYMMETRIC_SIZE", "1", 1}));
  EXPECT_NO_THROW(heap::check_heap_size({"SHMEM_SYMMETRIC_SIZE", "", 512ull << 20}));
  const std::uint64_t memory = physical_memory_bytes();
  const std::string range = fmt::format("must be 1 byte to {} ({} bytes, this machine's memory)",
                                        human_bytes(memory), memory);
  EXPECT_EQ(refusal([] {
              heap::check_heap_size({"SHMEM_SYMMETRIC_SIZE", "0", 0});
            }),
            "SHMEM_SYMMETRIC_SIZE=0 (0 bytes) is out of range: a PE's symmetric heap " + range);
  EXPECT_EQ(refusal([&] {
              heap::check_heap_size({"SMA_SYMMETRIC_SIZE", "huge", memory + 1});
            }),
            fmt::format("SMA_SYMMETRIC_SIZE=huge ({} bytes) is out of range: a PE's symmetric "
                        "heap {}",
                        memory + 1, range));
}

TEST(HeapAdmission, SegmentsBeyondDevShmAreRefusedWithWhatFits) {
  const heap::HeapRequest request{"SHMEM_SYMMETRIC_SIZE", "1G", 1ull << 30};
  const FileSystemSpace shm{10ull << 30, 12ull << 30};
  const std::size_t segment = (1ull << 30) + (2ull << 20);  // the runtime's 2 MiB on top
  EXPECT_NO_THROW(heap::admit_segments(request, segment, 9, shm));
  EXPECT_EQ(refusal([&] { heap::admit_segments(request, segment, 10, shm); }),
            "the symmetric heaps of the 10 PEs on this host need 10.0 GiB in /dev/shm (10 x 1.0 "
            "GiB: SHMEM_SYMMETRIC_SIZE=1G plus the runtime's own state and the program's global "
            "data), but /dev/shm has only 10.0 GiB free (of 12.0 GiB): lower SHMEM_SYMMETRIC_SIZE "
            "to at most 1022M, run fewer PEs on this host, or enlarge /dev/shm (mount -o "
            "remount,size=... /dev/shm; in Docker, --shm-size)");
  // The size it suggests fits, with the same 2 MiB on top; one more MiB would not.
  EXPECT_NO_THROW(heap::admit_segments(request, (1022ull << 20) + (2ull << 20), 10, shm));
  EXPECT_ANY_THROW(heap::admit_segments(request, (1023ull << 20) + (2ull << 20), 10, shm));
}

TEST(HeapAdmission, ThisHostsDevShmIsRead) {
  const auto shm = file_system_space(kShmDir);
  ASSERT_TRUE(shm.has_value());
  const heap::HeapRequest request{"SHMEM_SYMMETRIC_SIZE", "1M", 1ull << 20};
  EXPECT_NO_THROW(heap::admit_segments(request, 4096, 1));
  const std::string why = refusal([&] { heap::admit_segments(request, 1ull << 20, 1 << 30); });
  EXPECT_NE(why.find("but /dev/shm has only "), std::string::npos) << why;
}

TEST(HeapAdmission, OnePeIsToldWithoutACount) {
  const heap::HeapRequest request{"SHMEM_SYMMETRIC_SIZE", "", 512ull << 20};
  const std::string why = refusal([&] {
    heap::admit_segments(request, 100ull << 20, 1, {64ull << 20, 64ull << 20});
  });
  EXPECT_EQ(why.rfind("this PE's symmetric heap needs", 0), 0u) << why;
  EXPECT_NE(why.find("SHMEM_SYMMETRIC_SIZE (unset: 512.0 MiB)"), std::string::npos) << why;
  EXPECT_NE(why.find("needs 100.0 MiB in /dev/shm (100.0 MiB: "), std::string::npos) << why;
  // Where not even the runtime's own state fits, no size is suggested.
  const std::string none = refusal([&] {
    heap::admit_segments(request, 100ull << 20, 8, {8ull << 20, 64ull << 20});
  });
  EXPECT_EQ(none.find("lower SHMEM_SYMMETRIC_SIZE"), std::string::npos) << none;
  EXPECT_NE(none.find("run fewer PEs on this host"), std::string::npos) << none;
}

}  // namespace
}  // namespace shmoe
