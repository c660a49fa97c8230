// The table of settings (src/common/settings.def): parsing, defaults, errors, the table of
// environment variables in docs/environment.md, and that no source reads a shmoe variable around
// the table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "common/settings.hpp"
#include "common/unknown_settings.hpp"

namespace shmoe::settings {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = SHMOE_SOURCE_DIR;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Each test sets what it needs and leaves the variables it touched unset.
class Settings : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v :
         {"SHMOE_WAIT_SPIN", "SHMEM_SYMMETRIC_SIZE", "SMA_SYMMETRIC_SIZE", "SHMOE_INIT_TIMEOUT",
          "SHMOE_DEBUG", "SHMOE_TRANSPORT", "SHMOE_HOST_ID", "SHMOE_BARRIER"}) {
      set(v, std::nullopt);
    }
  }
};

TEST_F(Settings, DefaultsApplyWhenUnset) {
  EXPECT_EQ(symmetric_size(), std::size_t{512} << 20);
  EXPECT_EQ(init_timeout(), std::chrono::seconds(60));
  EXPECT_FALSE(debug());
  EXPECT_EQ(transport(), Transport::kAuto);
  EXPECT_FALSE(barrier().has_value());
  EXPECT_EQ(ucx_progress_thread(), 1);
  EXPECT_FALSE(wait_spin().has_value());
  EXPECT_FALSE(host_id().has_value());
  EXPECT_FALSE(text_of("SHMOE_WAIT_SPIN").has_value());
}

TEST_F(Settings, ValuesSetAreParsed) {
  set("SHMOE_WAIT_SPIN", "37");
  set("SHMOE_INIT_TIMEOUT", "2.5");
  set("SHMOE_DEBUG", "Yes");
  set("SHMOE_TRANSPORT", "ucx");
  set("SHMOE_HOST_ID", "node-7");
  EXPECT_EQ(wait_spin(), 37);
  EXPECT_EQ(init_timeout(), std::chrono::milliseconds(2500));
  EXPECT_TRUE(debug());
  EXPECT_EQ(transport(), Transport::kUcx);
  EXPECT_EQ(host_id(), "node-7");
  EXPECT_EQ(text_of("SHMOE_WAIT_SPIN"), "37");
}

// A choice is parsed once, to its enum; anything else is refused with every accepted value, and
// listings show them.
TEST_F(Settings, ChoicesAreParsedOnceAndListedWhenRefused) {
  set("SHMOE_BARRIER", "central");
  EXPECT_EQ(barrier(), Barrier::kCentral);
  set("SHMOE_TRANSPORT", "shm");
  EXPECT_EQ(transport(), Transport::kShm);
  set("SHMOE_TRANSPORT", "bogus");
  EXPECT_EQ(error_of("SHMOE_TRANSPORT"),
            "SHMOE_TRANSPORT=bogus is not one of the accepted values: auto, shm, ucx");
  EXPECT_THROW(transport(), Error);
  set("SHMOE_BARRIER", "Central");  // spellings are exact
  EXPECT_EQ(error_of("SHMOE_BARRIER"),
            "SHMOE_BARRIER=Central is not one of the accepted values: dissemination, central");
  set("SHMOE_BARRIER", std::nullopt);
  set("SHMOE_TRANSPORT", std::nullopt);
  for (const Entry& e : table()) {
    const std::string_view v = e.variable;
    if (v == "SHMOE_TRANSPORT") {
      EXPECT_EQ(e.choices(), "auto, shm, ucx");
    } else if (v == "SHMOE_BARRIER") {
      EXPECT_EQ(e.choices(), "dissemination, central");
    } else if (v == "SHMOE_WAIT_SPIN") {
      EXPECT_EQ(e.choices, nullptr);
    }
  }
  EXPECT_EQ(name_of(Transport::kUcx), "ucx");
  EXPECT_EQ(choice_named<Barrier>("dissemination"), Barrier::kDissemination);
  EXPECT_FALSE(choice_named<Barrier>("tree").has_value());
}

TEST_F(Settings, EnvironmentIsReadOnceUntilReread) {
  set("SHMOE_WAIT_SPIN", "5");
  ::setenv("SHMOE_WAIT_SPIN", "6", 1);
  EXPECT_EQ(wait_spin(), 5);
  reread();
  EXPECT_EQ(wait_spin(), 6);
}

TEST_F(Settings, BadValueNamesVariableValueAndRange) {
  set("SHMOE_WAIT_SPIN", "2000000000");
  EXPECT_EQ(error_text([] { wait_spin(); }),
            "SHMOE_WAIT_SPIN=2000000000 is out of range (allowed 0..1073741824)");
  EXPECT_EQ(error_of("SHMOE_WAIT_SPIN"),
            "SHMOE_WAIT_SPIN=2000000000 is out of range (allowed 0..1073741824)");
  set("SHMOE_INIT_TIMEOUT", "soon");
  EXPECT_EQ(error_text([] { init_timeout(); }),
            "SHMOE_INIT_TIMEOUT='soon' is not a duration in seconds (allowed 0..1e9, 0 = never)");
  set("SHMEM_SYMMETRIC_SIZE", "lots");
  EXPECT_EQ(error_text([] { symmetric_size_in_force(); }),
            "SHMEM_SYMMETRIC_SIZE='lots' is not a size (expected e.g. 4096, 512M, 2G)");
  // A bad value stops only its own users.
  EXPECT_EQ(transport(), Transport::kAuto);
  EXPECT_FALSE(barrier().has_value());
}

TEST_F(Settings, SymmetricSizeFallsBackToTheOldName) {
  EXPECT_EQ(symmetric_size_in_force().variable, "SHMEM_SYMMETRIC_SIZE");
  EXPECT_EQ(symmetric_size_in_force().text, "");
  EXPECT_EQ(symmetric_size_in_force().bytes, std::size_t{512} << 20);
  set("SMA_SYMMETRIC_SIZE", "3M");
  EXPECT_EQ(symmetric_size_in_force().variable, "SMA_SYMMETRIC_SIZE");
  EXPECT_EQ(symmetric_size_in_force().bytes, std::size_t{3} << 20);
  set("SHMEM_SYMMETRIC_SIZE", "5M");
  EXPECT_EQ(symmetric_size_in_force().variable, "SHMEM_SYMMETRIC_SIZE");
  EXPECT_EQ(symmetric_size_in_force().text, "5M");
  EXPECT_EQ(symmetric_size_in_force().bytes, std::size_t{5} << 20);
}

TEST_F(Settings, NamesOutsideTheTableAreRefused) {
  EXPECT_THROW(text_of("SHMOE_NO_SUCH_SETTING"), std::out_of_range);
  EXPECT_THROW(set("SHMOE_NO_SUCH_SETTING", "1"), std::out_of_range);
}

// Misspelt variables are named with the setting meant; names read elsewhere in shmoe (the
// launcher's, deep_ep's, the test programs') are not unknown; one far from any has no guess.
TEST(UnknownSettings, MisspeltNamesAreMatchedToTheClosestSetting) {
  const std::map<std::string, std::string> env = {
      {"SHMOE_TRANSPRT", "ucx"},      {"SHMEM_SYMETRIC_SIZE", "1G"},
      {"SHMOE_HANG_TIMOUT", "5"},     {"SHMEM_TRANSPORT", "ucx"},
      {"SHMOE_ZZZZ_QQQQ_XXXX", "1"},  {"SHMOE_SHRINK_TIMEOUT_MS", "10"},
      {"SHMOE_TEST_ANYTHING", "1"},   {"SHMOE_RANK", "0"},
      {"SHMOE_WARN_UNKNOWN_ENV", "1"}};
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  std::map<std::string, std::string> found;
  for (const UnknownVariable& v : unknown_variables()) found[v.name] = v.closest;
  for (const auto& [name, value] : env) ::unsetenv(name.c_str());
  const std::map<std::string, std::string> want = {{"SHMOE_TRANSPRT", "SHMOE_TRANSPORT"},
                                                   {"SHMEM_SYMETRIC_SIZE", "SHMEM_SYMMETRIC_SIZE"},
                                                   {"SHMOE_HANG_TIMOUT", "SHMOE_HANG_TIMEOUT"},
                                                   {"SHMEM_TRANSPORT", "SHMOE_TRANSPORT"},
                                                   {"SHMOE_ZZZZ_QQQQ_XXXX", ""}};
  for (const auto& [name, closest] : want) {
    ASSERT_TRUE(found.count(name)) << name << " was not reported";
    EXPECT_EQ(found[name], closest) << name;
  }
  for (const char* known :
       {"SHMOE_SHRINK_TIMEOUT_MS", "SHMOE_TEST_ANYTHING", "SHMOE_RANK", "SHMOE_WARN_UNKNOWN_ENV"}) {
    EXPECT_FALSE(found.count(known)) << known << " is known, but was reported as unknown";
  }
  EXPECT_EQ(describe({"SHMOE_TRANSPRT", "SHMOE_TRANSPORT"}),
            "SHMOE_TRANSPRT is not a shmoe setting and is ignored; did you mean SHMOE_TRANSPORT?");
  EXPECT_EQ(describe({"SHMOE_ZZZZ", ""}), "SHMOE_ZZZZ is not a shmoe setting and is ignored");
}

TEST(UnknownSettings, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("SHMOE_TRANSPORT", "SHMOE_TRANSPORT"), 0u);
  EXPECT_EQ(edit_distance("SHMOE_TRANSPRT", "SHMOE_TRANSPORT"), 1u);
  EXPECT_EQ(edit_distance("SHMEM_X", "SHMOE_X"), 2u);
  EXPECT_EQ(edit_distance("", "ABC"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

// docs/environment.md's table, one row per shmoe variable: name -> {meaning, default}, from
// its "# Environment variables" heading to the next section. Rows of other programs' variables
// (PMIx, Open MPI, UCX...) are not shmoe's.
std::map<std::string, std::pair<std::string, std::string>> documented_rows() {
  const std::string page = read_file(kSource / "docs" / "environment.md");
  const auto at = page.find("# Environment variables");
  EXPECT_NE(at, std::string::npos) << "docs/environment.md has no \"# Environment variables\"";
  std::istringstream lines(page.substr(at));
  std::map<std::string, std::pair<std::string, std::string>> rows;
  static const std::regex row(R"(^\| `([^`]+)`([^|]*) \| (.*) \| (.*) \|$)");
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("## ", 0) != 0) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const std::string name = m[1];
    if (!std::regex_match(name, std::regex("(SHMOE|SHMEM|SMA)_.*"))) continue;
    EXPECT_EQ(m[2].str(), "") << "the row of " << name << " names more than one variable";
    EXPECT_TRUE(rows.emplace(name, std::pair{m[3].str(), m[4].str()}).second)
        << name << " has two rows in docs/environment.md";
  }
  return rows;
}

TEST(SettingsTable, DocsListEveryVariableWithItsDefaultAndMeaning) {
  auto rows = documented_rows();
  std::set<std::string> in_table;
  for (const Entry& e : table()) {
    in_table.insert(e.variable);
    auto it = rows.find(e.variable);
    if (it == rows.end()) {
      ADD_FAILURE() << e.variable << " is in settings.def but not in docs/environment.md's table";
      continue;
    }
    EXPECT_EQ(it->second.second, e.shown_default)
        << "docs/environment.md's default of " << e.variable;
    EXPECT_EQ(it->second.first, e.meaning) << "docs/environment.md's meaning of " << e.variable;
  }
  for (const auto& [name, cells] : rows) {
    EXPECT_TRUE(in_table.count(name))
        << name << " is in docs/environment.md's table but not in settings.def";
  }
  EXPECT_EQ(rows.size(), table().size());
}

// shmoe's own variables are read through the table only, so a new one cannot bypass it.
TEST(SettingsTable, NoSourceReadsAShmoeVariableDirectly) {
  static const std::regex direct_read(
      R"((getenv|env::get|secure_getenv)\s*\(\s*"(SHMOE|SHMEM|SMA)_)");
  int files = 0;
  for (const char* dir : {"src", "tools", "python"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kSource / dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c") continue;
      ++files;
      const std::string text = read_file(entry.path());
      EXPECT_FALSE(std::regex_search(text, direct_read))
          << entry.path() << " reads a shmoe variable without the table in settings.def";
    }
  }
  EXPECT_GT(files, 50);
}

// Only env.cpp calls getenv: every other read goes through env::get (other programs' variables)
// or the table, where a reader can find it.
TEST(SettingsTable, OnlyEnvCallsGetenv) {
  static const std::regex getenv_call(R"(\bgetenv\s*\()");
  for (const char* dir : {"src", "tools", "python"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kSource / dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c") continue;
      if (entry.path() == kSource / "src/common/env.cpp") continue;
      EXPECT_FALSE(std::regex_search(read_file(entry.path()), getenv_call)) << entry.path();
    }
  }
}

}  // namespace
}  // namespace shmoe::settings
