// Reading and writing files as the CLI does: failures are Statuses that name
// the file and field, and a write never leaves a file half-written.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "core/format.h"
#include "core/json_parse.h"
#include "core/text_format.h"

namespace optpipe {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optpipe-file-io-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int FilesIn() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(FileIo, AFailedWriteLeavesThePreviousFileWhole) {
  const std::string path = (dir_ / "s.json").string();
  ASSERT_TRUE(WriteFile(path, "previous").ok());
  // A child process whose files may not exceed 4 KiB: the write of 100 KB
  // fails partway (EFBIG), as on a full disk.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &limit);
    const Status st = WriteFile(path, std::string(100000, 'x'));
    _exit(st.ok() ? 0 : st.message().find("s.json: cannot write") != std::string::npos ? 3 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the write should fail with a message naming the file";
  StatusOr<std::string> kept = ReadFile(path);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "previous");
  EXPECT_EQ(FilesIn(), 1) << "the temporary is removed";
}

TEST_F(FileIo, AWriteReplacesTheFileWholeWithTheUsualMode) {
  const std::string path = (dir_ / "s.json").string();
  ASSERT_TRUE(WriteFile(path, std::string(50000, 'a')).ok());
  ASSERT_TRUE(WriteFile(path, "short").ok());
  EXPECT_EQ(*ReadFile(path), "short");
  EXPECT_EQ(FilesIn(), 1);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  const mode_t mask = umask(0);
  umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << "not mkstemp's 0600";
}

TEST_F(FileIo, WritingToADeviceOrADirectorySaysWhy) {
  EXPECT_TRUE(WriteFile("/dev/null", "x").ok());
  const Status full = WriteFile("/dev/full", std::string(1 << 16, 'x'));
  EXPECT_NE(full.message().find("/dev/full: cannot write"), std::string::npos) << full.message();
  const Status dir = WriteFile(dir_.string(), "x");
  EXPECT_NE(dir.message().find("is a directory"), std::string::npos) << dir.message();
}

TEST_F(FileIo, ReadingADirectoryIsBadInput) {
  StatusOr<std::string> text = ReadFile(dir_.string());
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("is a directory"), std::string::npos);
  EXPECT_FALSE(LoadProblem(dir_.string()).ok());
  EXPECT_FALSE(LoadTimedSchedule(dir_.string()).ok());
}

TEST(JsonText, AnOverflowingNumberNamesItsField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": {"b": [1, 2, 1e400]}})", "a.b[2]: '1e400'"},
      {"[1e400]", "[0]: '1e400'"},
      {"[[1], [2, -1e999]]", "[1][1]: '-1e999'"},
      {R"({"x": {"y": 1}, "z": [{"w": 0}, {"w": 2e308}]})", "z[1].w: '2e308'"},
      {"1e400", "'1e400'"},
  };
  for (const auto& [text, want] : cases) {
    StatusOr<nlohmann::json> j = ParseJsonText(text);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().message().rfind(want, 0), 0u) << text << " -> " << j.status().message();
  }
  EXPECT_TRUE(ParseJsonText("[1.7e308, -1e-400]").ok()) << "large and underflowing numbers read";
  EXPECT_NE(ParseJsonText("{").status().message().find("not valid JSON"), std::string::npos);
}

TEST(ProblemSize, CountsBeyondAnIntAreRefusedBeforeAnythingIsSized) {
  const auto parse = [](int devices, int v, int m, SizeLimit limit = {}) {
    return ParseProblem(R"({"format": "optpipe-problem/1", "devices": )" + std::to_string(devices) +
                            R"(, "stages_per_device": )" + std::to_string(v) +
                            R"(, "microbatches": )" + std::to_string(m) +
                            R"(, "stage_time": {"f": 1, "b": 1}})",
                        limit);
  };
  for (auto [d, v] : {std::pair{46341, 46341}, {65536, 100000}}) {
    StatusOr<Problem> p = parse(d, v, 8);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("op indices (32-bit)"), std::string::npos)
        << p.status().message();
  }
  // The largest shape whose op slots (5 per stage and micro-batch) fit an int.
  EXPECT_TRUE(CheckShape(1, 1, kMaxOpSlots / kNumOpTypes).ok());
  EXPECT_FALSE(CheckShape(1, 1, kMaxOpSlots / kNumOpTypes + 1).ok());
  // A caller's budget: 4 x 1 x 8 split ops = 96, refused at 95 with the reason given.
  EXPECT_EQ(OpCount(4, 1, 8, true, false), 96);
  EXPECT_TRUE(parse(4, 1, 8, SizeLimit{96, ""}).ok());
  StatusOr<Problem> over = parse(4, 1, 8, SizeLimit{95, "a test budget"});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("gives 96 ops, more than the 95 allowed (a test budget)"),
            std::string::npos)
      << over.status().message();
}

TEST(ProblemSize, AnArrayOfTheWrongLengthIsRefusedWithoutFillingTheOthers) {
  StatusOr<Problem> p = ParseProblem(R"({"format": "optpipe-problem/1", "devices": 4,
    "stages_per_device": 10000000, "microbatches": 8, "stage_time": {"f": [1, 2], "b": 1}})");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("stage_time.f: expected a number or an array of 40000000"),
            std::string::npos)
      << p.status().message();
}

TEST(Ticks, StayWithinTheSpanAndTheirCount) {
  EXPECT_EQ(Ticks(0, 10, 2.5, 100), (std::vector<double>{0, 2.5, 5, 7.5, 10}));
  EXPECT_EQ(Ticks(-1e9, -1e9 + 20, 10, 100), (std::vector<double>{-1e9, -1e9 + 10, -1e9 + 20}));
  EXPECT_EQ(Ticks(0, 1e6, 1, 7).size(), 7u);
  EXPECT_TRUE(Ticks(1e300, 1e300, 1e-10, 100).empty()) << "t0 / step beyond exact integers";
  EXPECT_TRUE(Ticks(0, 1, 0, 100).empty());
}

}  // namespace
}  // namespace optpipe
