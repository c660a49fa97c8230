#include "heap/program_data.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/error.hpp"

namespace shmoe::heap {
namespace {

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
std::uintptr_t page_floor(std::uintptr_t a) {
  return a & ~(page_size() - 1);
}
std::uintptr_t page_ceil(std::uintptr_t a) {
  return page_floor(a + page_size() - 1);
}

struct ProgramHeaders {
  std::uintptr_t writable_begin = UINTPTR_MAX;
  std::uintptr_t writable_end = 0;
  std::uintptr_t relro_end = 0;  // what the dynamic loader made read-only ends here (page floor)
};

// dl_iterate_phdr reports the executable first.
int read_executable_headers(dl_phdr_info* info, std::size_t, void* out) {
  auto* h = static_cast<ProgramHeaders*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) != 0 && ph.p_memsz > 0) {
      h->writable_begin = std::min(h->writable_begin, begin);
      h->writable_end = std::max<std::uintptr_t>(h->writable_end, begin + ph.p_memsz);
    } else if (ph.p_type == PT_GNU_RELRO) {
      // The loader protects [floor(start), floor(start + size)), whatever the linker padded.
      h->relro_end = page_floor(begin + ph.p_memsz);
    }
  }
  return 1;
}

struct Mapping {
  std::uintptr_t begin = 0, end = 0;
  bool writable = false;
};

std::vector<Mapping> mappings_overlapping(std::uintptr_t begin, std::uintptr_t end) {
  std::vector<Mapping> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    Mapping m;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &m.begin, &m.end, perms) != 3) continue;
    if (m.end <= begin || m.begin >= end) continue;
    m.writable = perms[0] == 'r' && perms[1] == 'w';
    out.push_back(m);
  }
  return out;
}

// Copies through the system call itself, not a library wrapper: sanitizers intercept memcpy and
// write(2) and would report the red zones they keep between globals.
void copy_into(int fd, const std::byte* from, std::size_t bytes, const std::string& name) {
  std::size_t done = 0;
  while (done < bytes) {
    const long n = ::syscall(SYS_pwrite64, fd, from + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw make_error("cannot copy the program's data into {}: {} (is /dev/shm large enough?)",
                       name, n < 0 ? std::strerror(errno) : "short write");
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

DataRange find_program_data(std::string* why) {
  ProgramHeaders h;
  dl_iterate_phdr(read_executable_headers, &h);
  if (h.writable_end == 0) {
    *why = "the executable has no writable segment";
    return {};
  }
  std::uintptr_t begin = std::max(page_floor(h.writable_begin), h.relro_end);
  const std::uintptr_t end = page_ceil(h.writable_end);
  // The loader may have made more of the first pages read-only than the headers say; what is
  // read-only is constant and need not be symmetric. Past that, the run must be read-write
  // without a gap, or it is not what this code knows how to move.
  auto maps = mappings_overlapping(begin, end);
  std::size_t i = 0;
  while (i < maps.size() && !maps[i].writable && maps[i].end < end) begin = maps[i++].end;
  std::uintptr_t covered = begin;
  for (; i < maps.size(); ++i) {
    if (!maps[i].writable || maps[i].begin > covered) {
      *why = fmt::format(
          "the executable's data [{:#x}, {:#x}) is not one read-write run in "
          "/proc/self/maps (at {:#x})",
          begin, end, std::max(covered, maps[i].begin));
      return {};
    }
    covered = std::max(covered, maps[i].end);
  }
  if (covered < end || begin >= end) {
    *why = fmt::format("the executable's data [{:#x}, {:#x}) is not fully mapped", begin, end);
    return {};
  }
  return {reinterpret_cast<std::byte*>(begin), end - begin};
}

Segment move_into_shared_memory(const DataRange& range, const std::string& name) {
  Segment object = Segment::create(name, range.size);
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    throw make_error("cannot reopen {}: {}", name, std::strerror(errno));
  }
  try {
    copy_into(fd, range.base, range.size, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  // From the copy to here nothing may write to the range, this thread included: with a static
  // C library its own state (malloc's) lives there. Hence the raw system call and no allocation.
  const long mapped = ::syscall(SYS_mmap, range.base, range.size, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_FIXED, fd, 0L);
  const int err = errno;
  ::close(fd);
  if (mapped == -1 || reinterpret_cast<std::byte*>(mapped) != range.base) {
    throw make_error("cannot map {} over the program's data at {} ({} bytes): {}", name,
                     static_cast<const void*>(range.base), range.size, std::strerror(err));
  }
  return object;
}

std::string object_file_of(const void* addr) {
  Dl_info info{};
  if (::dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace shmoe::heap
