#include "heap/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "common/log.hpp"
#include "heap/bus_error.hpp"

namespace shmoe::heap {
namespace {

std::byte* map_fd(int fd, std::size_t size, const std::string& name, std::byte* at) {
  // MAP_NORESERVE: a large heap costs nothing until its pages are touched.
  void* p = ::mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE | (at != nullptr ? MAP_FIXED : 0), fd, 0);
  if (p == MAP_FAILED) {
    throw make_error("cannot map symmetric heap segment {} ({} bytes): {}", name, size,
                     std::strerror(errno));
  }
  return static_cast<std::byte*>(p);
}

// Written before the fatal hook is armed and read only by it, so no lock is needed.
std::vector<std::string> g_names_to_remove;

void remove_names() {
  for (const auto& name : g_names_to_remove) ::shm_unlink(name.c_str());
}

}  // namespace

void Segment::remove_names_at_fatal_exit(std::vector<std::string> names) {
  log::set_fatal_cleanup(nullptr);
  g_names_to_remove = std::move(names);
  log::set_fatal_cleanup(remove_names);
}

void Segment::forget_names_at_fatal_exit() {
  log::set_fatal_cleanup(nullptr);
}

void Segment::remove_name_of(int pid, int rank) {
  ::shm_unlink(name_for(pid, rank).c_str());
  ::shm_unlink(data_name_for(pid, rank).c_str());
}

std::string Segment::name_for(int pid, int rank) {
  return fmt::format("/shmoe-{}-{}", pid, rank);
}

std::string Segment::data_name_for(int pid, int rank) {
  return fmt::format("/shmoe-{}-{}-data", pid, rank);
}

std::byte* Segment::reserve_window(std::size_t size) {
  // Over-reserve, then keep the aligned part: every PE's heap then starts on a kWindowAlignment
  // boundary, so one symmetric offset is as aligned on every PE as on this one (shmem_align).
  const std::size_t reserved = size + kWindowAlignment;
  void* p =
      ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw make_error("cannot reserve {} bytes of address space for a symmetric window: {}", size,
                     std::strerror(errno));
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (begin + kWindowAlignment - 1) & ~(kWindowAlignment - 1);
  if (aligned > begin) ::munmap(p, aligned - begin);
  if (aligned + size < begin + reserved) {
    ::munmap(reinterpret_cast<void*>(aligned + size), begin + reserved - (aligned + size));
  }
  return reinterpret_cast<std::byte*>(aligned);
}

void Segment::move_to(std::byte* at) {
  // The system call itself: UCX's memory hooks replace mremap() with a version that drops the
  // new address (UCX 1.13), which moved the mapping to address 0.
  auto* p = reinterpret_cast<void*>(
      ::syscall(SYS_mremap, base_, size_, size_, MREMAP_MAYMOVE | MREMAP_FIXED, at));
  if (p == MAP_FAILED) {
    throw make_error("cannot move the mapping of {} ({} bytes) to {}: {}", name_, size_,
                     static_cast<const void*>(at), std::strerror(errno));
  }
  base_ = static_cast<std::byte*>(p);
}

Segment Segment::create(const std::string& name, std::size_t size, std::byte* at) {
  // Pages come at first touch (MAP_NORESERVE below): a page /dev/shm cannot supply then is a
  // SIGBUS, which must say so (see shm_admission.hpp for why nothing is reserved here).
  explain_bus_errors_in_segments();
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    throw make_error("cannot create symmetric heap segment {}: {}", name, std::strerror(errno));
  }
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw make_error(
        "cannot size symmetric heap segment {} to {} bytes: {} (is /dev/shm large "
        "enough? lower SHMEM_SYMMETRIC_SIZE)",
        name, size, std::strerror(err));
  }
  Segment s;
  try {
    s.base_ = map_fd(fd, size, name, at);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);
  s.size_ = size;
  s.name_ = name;
  s.owner_ = true;
  s.linked_ = true;
  return s;
}

Segment Segment::attach(const std::string& name, std::size_t size, std::byte* at) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    throw make_error("cannot open peer segment {}: {} (is the peer on another host?)", name,
                     std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < size) {
    ::close(fd);
    throw make_error("peer segment {} is smaller ({} bytes) than announced ({} bytes)", name,
                     static_cast<long long>(st.st_size), size);
  }
  Segment s;
  try {
    s.base_ = map_fd(fd, size, name, at);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  s.size_ = size;
  s.name_ = name;
  return s;
}

Segment::~Segment() {
  if (owner_ && linked_) ::shm_unlink(name_.c_str());
  if (base_ != nullptr) ::munmap(base_, size_);
}

Segment::Segment(Segment&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      name_(std::move(o.name_)),
      owner_(std::exchange(o.owner_, false)),
      linked_(std::exchange(o.linked_, false)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    this->~Segment();
    new (this) Segment(std::move(o));
  }
  return *this;
}

void Segment::unlink() {
  if (owner_ && linked_) {
    ::shm_unlink(name_.c_str());
    linked_ = false;
  }
}

}  // namespace shmoe::heap
