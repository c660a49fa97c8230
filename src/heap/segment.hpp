// A PE's symmetric heap segment: a POSIX shared-memory object that every PE on the host maps.
// The name exists only during start-up: once every peer has mapped it, the owner unlinks it, so
// a PE that dies later leaves nothing behind in /dev/shm (the kernel frees the memory with the
// last mapping). The launcher sweeps names of PEs that died during start-up.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace shmoe::heap {

class Segment {
 public:
  Segment() = default;
  // Creates and maps a new object of `size` bytes (pages are allocated lazily), at `at` if given
  // (replacing what is mapped there, e.g. a reserved window), else where the kernel chooses.
  static Segment create(const std::string& name, std::size_t size, std::byte* at = nullptr);
  // Maps a peer's object; throws naming the peer's segment if it is missing or smaller.
  static Segment attach(const std::string& name, std::size_t size, std::byte* at = nullptr);
  // The names of PE `rank` of the process `pid`, its heap's and its program data's (see
  // program_data.hpp): what the launcher sweeps.
  static std::string name_for(int pid, int rank);
  static std::string data_name_for(int pid, int rank);
  // Address space for mappings placed side by side, starting on a kWindowAlignment boundary:
  // nothing is accessible there until segments are created or attached over it, and they unmap
  // their part when they go.
  static constexpr std::size_t kWindowAlignment = std::size_t{1} << 30;
  static std::byte* reserve_window(std::size_t size);

  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  void unlink();  // removes the name; the mapping stays valid
  // Leaves the mapping in place when this object goes (its pages go with the process): memory
  // something outside the library still points at.
  void keep_mapped() { base_ = nullptr; }
  // Moves the mapping to `at`, replacing what is mapped there (the same pages, a new address).
  void move_to(std::byte* at);

  // Until forget_names_at_fatal_exit(), a fatal exit of this process removes these names (its
  // own segment's and the peers' it knows), so a job that fails during start-up leaves nothing
  // in /dev/shm even when the peer that owned a name was killed.
  static void remove_names_at_fatal_exit(std::vector<std::string> names);
  static void forget_names_at_fatal_exit();
  // Removes the names of PE `rank` of process `pid` if they are still there (the process died
  // before removing them).
  static void remove_name_of(int pid, int rank);
  std::byte* base() const { return base_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
  bool linked_ = false;
};

}  // namespace shmoe::heap
