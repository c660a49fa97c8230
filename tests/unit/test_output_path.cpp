// Output paths checked before a run: a file or directory that cannot be written is refused with
// the option, the path and the reason; the check leaves nothing behind and changes nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/output_path.hpp"

namespace shmoe {
namespace {
namespace fs = std::filesystem;

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shmoe-output-path-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OutputPath, ANewFileIsAcceptedAndNotLeftBehind) {
  const std::string file = (dir_ / "x.csv").string();
  EXPECT_EQ(why_not_writable_file("--csv", file), "");
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(OutputPath, AnExistingFileIsAcceptedUnchanged) {
  const std::string file = (dir_ / "x.csv").string();
  std::ofstream(file) << "kept\n";
  EXPECT_EQ(why_not_writable_file("--csv", file), "");
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "kept");
}

TEST_F(OutputPath, FilesThatCannotBeWrittenAreRefusedWithTheReason) {
  EXPECT_EQ(why_not_writable_file("--trace", "/proc/nonexistent/t.json"),
            "--trace=/proc/nonexistent/t.json: cannot write it: the directory /proc/nonexistent "
            "does not exist");
  EXPECT_EQ(why_not_writable_file("--csv", dir_.string()),
            "--csv=" + dir_.string() + ": it is a directory, not a file");
  EXPECT_EQ(why_not_writable_file("--csv", ""), "--csv=: the path is empty");
  // /proc refuses new files even to root, whose access() checks would all pass.
  EXPECT_EQ(why_not_writable_file("--csv", "/proc/x.csv")
                .rfind("--csv=/proc/x.csv: cannot write it: ", 0),
            0u);
}

TEST_F(OutputPath, DirectoriesAreCreated) {
  const std::string sub = (dir_ / "a" / "b").string();
  EXPECT_EQ(why_not_writable_directory("--output-dir", sub), "");
  EXPECT_TRUE(fs::is_directory(sub));
  EXPECT_TRUE(fs::is_empty(sub));  // the probe file is gone
}

TEST_F(OutputPath, DirectoriesThatCannotBeMadeAreRefusedWithTheReason) {
  EXPECT_EQ(why_not_writable_directory("--output-dir", "/proc/nonexistent"),
            "--output-dir=/proc/nonexistent: cannot create the directory: No such file or "
            "directory");
  const std::string file = (dir_ / "f").string();
  std::ofstream(file) << "x";
  EXPECT_EQ(why_not_writable_directory("--output-dir", file)
                .rfind("--output-dir=" + file + ": cannot create the directory: ", 0),
            0u);
  EXPECT_EQ(why_not_writable_directory("--output-dir", "/proc")
                .rfind("--output-dir=/proc: cannot create files in it: ", 0),
            0u);
}

}  // namespace
}  // namespace shmoe
