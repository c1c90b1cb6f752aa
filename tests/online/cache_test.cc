#include "online/cache.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/checker.h"
#include "core/format.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

namespace fs = std::filesystem;
using testing::UnitProblem;

// A fresh folder per test, removed after it.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("optpipe-cache-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string File(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TimedSchedule Timed(const Problem& p, const std::string& method) {
  const Solution s = testing::Solve(p, method);
  return ToTimed(p, s.schedule, s.sim);
}

// Every schedule a lookup returns: simulated as reported, and valid.
void ExpectCertified(const Problem& p, const CacheLookup& found) {
  StatusOr<SimResult> sim = Simulate(p, found.schedule);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_EQ(ToJson(ToTimed(p, found.schedule, *sim)),
            ToJson(ToTimed(p, found.schedule, found.sim)));
  const CheckReport rep = CheckSchedule(p, ToTimed(p, found.schedule, found.sim));
  EXPECT_TRUE(rep.valid()) << rep.errors.front();
}

// Room for `activations` of 1 on every device (static 0).
Problem Limited(Problem p, double activations) {
  p.memory_limit = std::vector<double>(p.devices, activations);
  return p;
}

// --- The key ---

// Unit times: every time is 1/3 of the largest stage time (F+B+W = 3), and
// round(ln(1/3) / ln(1.04)) = round(-28.01) = -28; comm 0 is clamped to
// 1e-3: round(-176.13) = -176.
TEST(CacheKey, BucketsByHand) {
  const Problem p = UnitProblem(2, 4, /*split=*/true);
  const CacheKey k = MakeCacheKey(p);
  EXPECT_EQ(k.structure,
            "optpipe-key/1 D=2 v=1 M=4 placement=0,1 split=1 offload=0 limit=0 links=0|1 "
            "objective=makespan");
  EXPECT_EQ(k.buckets, (std::vector<int>{-28, -28, -28, -28, -28, -28, -176}));
  EXPECT_EQ(Bucket(1.0), 0);
  EXPECT_EQ(Bucket(1.04), 1);
  EXPECT_EQ(Bucket(0.0), -176);
}

// F 1% slower: f/T = 1.01/3.01 -> -27.84, b/T = 1/3.01 -> -28.10, both -28.
// F 50% slower: f/T = 1.5/3.5 -> -21.60 -> -22, b/T = 1/3.5 -> -31.94 -> -32.
TEST(CacheKey, SmallChangesShareAKeyLargeOnesDoNot) {
  const Problem p = UnitProblem(2, 4, true);
  Problem slower = p, much_slower = p;
  for (double& f : slower.f) f *= 1.01;
  for (double& f : much_slower.f) f *= 1.5;
  EXPECT_EQ(MakeCacheKey(slower), MakeCacheKey(p));
  const CacheKey k = MakeCacheKey(much_slower);
  EXPECT_EQ(k.structure, MakeCacheKey(p).structure);
  EXPECT_EQ(k.buckets, (std::vector<int>{-22, -32, -32, -22, -32, -32, -176}));
  EXPECT_EQ(KeyDistance(k.buckets, MakeCacheKey(p).buckets), 6);
}

// Proportions, not units: every time (or every memory amount) times one
// factor is the same key, even a large factor.
TEST(CacheKey, ScaleFree) {
  const Problem p = Limited(UnitProblem(4, 8, true), 3);
  Problem times = p, memory = p;
  for (auto* v : {&times.f, &times.b, &times.w, &times.comm}) {
    for (double& x : *v) x *= 1.5;
  }
  for (auto* v : {&memory.activation, &memory.freed_by_b, &*memory.memory_limit}) {
    for (double& x : *v) x *= 1000;
  }
  EXPECT_EQ(MakeCacheKey(times), MakeCacheKey(p));
  EXPECT_EQ(MakeCacheKey(memory), MakeCacheKey(p));
}

// Memory: room (limit - static) / largest activation = 3 -> round(28.01) = 28,
// activation 1/1 -> 0, freed_by_b 0.5 -> round(-17.67) = -18 per stage.
TEST(CacheKey, MemoryInActivations) {
  const Problem p = Limited(UnitProblem(2, 4, true), 3);
  const std::vector<int>& b = MakeCacheKey(p).buckets;
  ASSERT_EQ(b.size(), 7u + 2 + 2 * 2);
  EXPECT_EQ(std::vector<int>(b.begin() + 7, b.end()), (std::vector<int>{28, 28, 0, -18, 0, -18}));
}

TEST(CacheKey, StructureChangesTheKey) {
  const Problem p = UnitProblem(4, 8, true);
  const std::string base = MakeCacheKey(p).structure;
  std::vector<Problem> changed(7, p);
  changed[0] = UnitProblem(4, 9, true);   // M
  changed[1] = UnitProblem(2, 8, true);   // D
  changed[2] = UnitProblem(4, 8, false);  // W fused
  changed[3].offload = std::vector<double>(4, 1.0);
  changed[3].offloadable = std::vector<double>(4, 1.0);
  changed[4] = Limited(p, 8);
  changed[5].objective = Objective::kDeviceSpan;
  changed[6].host_links = {{0, 1}, {2, 3}};
  for (std::size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(MakeCacheKey(changed[i]).structure, base) << i;
  }
  Problem vshape = UnitProblem(2, 4, true), interleaved = vshape;
  for (Problem* q : {&vshape, &interleaved}) {
    q->stages_per_device = 2;
    for (auto* v : {&q->f, &q->b, &q->w, &q->activation, &q->freed_by_b, &q->offloadable})
      v->assign(4, (*v)[0]);
    q->comm.assign(3, 0.0);
  }
  vshape.stage_device = *PlaceStages("vshape", 2, 2);
  interleaved.stage_device = *PlaceStages("interleaved", 2, 2);
  EXPECT_NE(MakeCacheKey(vshape).structure, MakeCacheKey(interleaved).structure);
  // The same partition of host links written in another order is the same.
  Problem links = p;
  links.host_links = {{3, 2}, {1, 0}};
  EXPECT_EQ(MakeCacheKey(links), MakeCacheKey(changed[6]));
}

TEST(CacheKey, TextRoundTrip) {
  const CacheKey k = MakeCacheKey(Limited(UnitProblem(3, 5, true), 2.5));
  StatusOr<CacheKey> back = ParseCacheKey(ToString(k));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, k);
  EXPECT_FALSE(ParseCacheKey("D=3 @ 1,2").ok());
  EXPECT_FALSE(ParseCacheKey(k.structure + " @ 1,x").ok());
  EXPECT_EQ(KeyDistance({1, 2}, {1, 2, 3}), -1);
}

TEST(CacheKey, DefaultPath) {
  EXPECT_EQ(DefaultCachePath("/a.db", "/x", "/h"), "/a.db");
  EXPECT_EQ(DefaultCachePath("", "/x", "/h"), "/x/optpipe/schedules.db");
  EXPECT_EQ(DefaultCachePath("", "", "/h"), "/h/.cache/optpipe/schedules.db");
  EXPECT_EQ(DefaultCachePath("", "", ""), "");
}

// --- Lookups ---

TEST(CacheRetime, SameProblemSameTimes) {
  const Problem p = UnitProblem(4, 8, true);
  const TimedSchedule t = Timed(p, "zb-h1");
  StatusOr<Retimed> r = Retime(p, t, LargestStageTime(p));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(ToJson(ToTimed(p, r->schedule, r->sim)), ToJson(t));
}

TEST_F(CacheTest, MissThenStoreThenHit) {
  const Problem p = UnitProblem(4, 8, true);
  ScheduleCache cache = ScheduleCache::Open(File("sub/dir/c.db"));  // folders created
  ASSERT_TRUE(cache.enabled()) << cache.TakeWarning().value_or("");
  EXPECT_EQ(cache.Lookup(p).outcome, CacheOutcome::kMiss);
  const Solution zb = testing::Solve(p, "zb-h1");
  TimedSchedule t = ToTimed(p, zb.schedule, zb.sim);
  t.info.bound = 27;
  t.info.solve_seconds = 1.5;
  StatusOr<CacheStored> put = cache.Store(p, t);
  ASSERT_TRUE(put.ok()) << put.status().message();
  EXPECT_EQ(put->outcome, StoreOutcome::kAdded);

  const CacheLookup found = ScheduleCache::Open(File("sub/dir/c.db")).Lookup(p);
  ASSERT_EQ(found.outcome, CacheOutcome::kHit);
  EXPECT_EQ(found.distance, 0);
  EXPECT_TRUE(found.same_problem);
  EXPECT_EQ(found.entry.method, "zb-h1");
  EXPECT_EQ(found.entry.bound, 27);
  EXPECT_EQ(found.entry.solve_seconds, 1.5);
  EXPECT_EQ(found.entry.objective, 27);
  EXPECT_EQ(ToJson(ToTimed(p, found.schedule, found.sim)), ToJson(ToTimed(p, zb.schedule, zb.sim)));
  ExpectCertified(p, found);
}

// A problem with the same key but other times: the cached orders, re-timed.
TEST_F(CacheTest, HitRetimedOnSlightlyDifferentTimes) {
  const Problem p = UnitProblem(4, 8, true);
  ScheduleCache cache = ScheduleCache::Open(File("c.db"));
  ASSERT_TRUE(cache.Store(p, Timed(p, "zb-h1")).ok());
  Problem q = p;
  q.f[2] *= 1.01;
  q.b[1] *= 0.99;
  ASSERT_EQ(MakeCacheKey(q), MakeCacheKey(p));
  const CacheLookup found = cache.Lookup(q);
  ASSERT_EQ(found.outcome, CacheOutcome::kHit);
  EXPECT_FALSE(found.same_problem);
  EXPECT_NE(found.sim.objective, 27);  // timed on q, not the file's times
  EXPECT_NEAR(found.sim.objective, 27, 0.5);
  ExpectCertified(q, found);
}

TEST_F(CacheTest, NearHitWithinTheRadius) {
  const Problem p = UnitProblem(2, 4, true);
  ScheduleCache cache = ScheduleCache::Open(File("c.db"));
  ASSERT_TRUE(cache.Store(p, Timed(p, "1f1b")).ok());
  Problem q = p, far = p;
  for (double& f : q.f) f *= 1.5;  // distance 6 (see SmallChangesShareAKeyLargeOnesDoNot)
  for (double& f : far.f) f *= 3;  // f/T = 3/5: -13, 15 buckets away
  const CacheLookup found = cache.Lookup(q);
  ASSERT_EQ(found.outcome, CacheOutcome::kNear);
  EXPECT_EQ(found.distance, 6);
  EXPECT_EQ(found.entry.method, "1f1b");
  ExpectCertified(q, found);
  EXPECT_EQ(cache.Lookup(far).outcome, CacheOutcome::kMiss);
  // Another structure is never near.
  EXPECT_EQ(cache.Lookup(UnitProblem(2, 5, true)).outcome, CacheOutcome::kMiss);
}

// Room 3.9 is in the bucket of room 4 (34.70 and 35.35 round to 35), but
// 1F1B's device 0 holds 4 activations: its orders deadlock there, so the row
// is passed over, never returned.
TEST_F(CacheTest, HitThatNoLongerFitsIsPassedOver) {
  const Problem p = Limited(UnitProblem(4, 8, false), 4);
  const Problem tighter = Limited(UnitProblem(4, 8, false), 3.9);
  ASSERT_EQ(MakeCacheKey(p), MakeCacheKey(tighter));
  ScheduleCache cache = ScheduleCache::Open(File("c.db"));
  ASSERT_TRUE(cache.Store(p, Timed(p, "1f1b")).ok());
  const CacheLookup found = cache.Lookup(tighter);
  EXPECT_EQ(found.outcome, CacheOutcome::kMiss);
  EXPECT_EQ(found.passed_over, 1);
}

TEST_F(CacheTest, KeepsTheBetterSchedule) {
  const Problem p = UnitProblem(4, 8, true);
  ScheduleCache cache = ScheduleCache::Open(File("c.db"));
  StatusOr<CacheStored> first = cache.Store(p, Timed(p, "1f1b"));    // 30
  StatusOr<CacheStored> better = cache.Store(p, Timed(p, "zb-h1"));  // 27
  StatusOr<CacheStored> worse = cache.Store(p, Timed(p, "1f1b"));
  Problem scaled = p;  // in other units: compared as objective / largest stage time
  for (auto* v : {&scaled.f, &scaled.b, &scaled.w}) {
    for (double& x : *v) x *= 10;
  }
  StatusOr<CacheStored> scaled_worse = cache.Store(scaled, Timed(scaled, "1f1b"));
  ASSERT_TRUE(first.ok() && better.ok() && worse.ok() && scaled_worse.ok());
  EXPECT_EQ(better->outcome, StoreOutcome::kReplaced);
  EXPECT_EQ(better->id, first->id);
  EXPECT_EQ(worse->outcome, StoreOutcome::kKept);
  EXPECT_EQ(scaled_worse->outcome, StoreOutcome::kKept);
  const CacheLookup found = cache.Lookup(scaled);
  ASSERT_EQ(found.outcome, CacheOutcome::kHit);
  EXPECT_EQ(found.entry.method, "zb-h1");
  EXPECT_DOUBLE_EQ(found.sim.objective, 270);
}

TEST_F(CacheTest, RefusesAScheduleOfAnotherProblem) {
  ScheduleCache cache = ScheduleCache::Open(File("c.db"));
  const Problem p = UnitProblem(4, 8, true);
  Problem q = p;
  q.f[0] = 2;
  StatusOr<CacheStored> put = cache.Store(q, Timed(p, "1f1b"));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(cache.enabled());
  EXPECT_FALSE(cache.TakeWarning());
}

TEST_F(CacheTest, ListGetFindRemoveImport) {
  ScheduleCache cache = ScheduleCache::Open(File("a.db"));
  const Problem p = UnitProblem(4, 8, true), q = UnitProblem(2, 4, false);
  ASSERT_TRUE(cache.Store(p, Timed(p, "zb-h1")).ok());
  ASSERT_TRUE(cache.Store(q, Timed(q, "1f1b")).ok());
  StatusOr<std::vector<CacheEntry>> rows = cache.List();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].key, MakeCacheKey(q));
  EXPECT_TRUE((*rows)[1].problem_json.empty());
  EXPECT_EQ((*rows)[0].version, "0.1.0");
  EXPECT_EQ((*rows)[0].created.size(), 20u);  // 2024-12-03T13:54:38Z
  StatusOr<CacheEntry> got = cache.Get((*rows)[0].id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->problem_json, ToJson(p));
  StatusOr<std::optional<CacheEntry>> found = cache.Find(MakeCacheKey(q));
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id, (*rows)[1].id);

  ScheduleCache other = ScheduleCache::Open(File("b.db"));
  StatusOr<ImportSummary> sum = other.Import(File("a.db"));
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum->added, 2);
  sum = other.Import(File("a.db"));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->kept, 2);
  EXPECT_EQ(other.Lookup(q).outcome, CacheOutcome::kHit);
  EXPECT_FALSE(other.Import(File("none.db")).ok());

  EXPECT_TRUE(cache.Remove((*rows)[0].id).ok());
  EXPECT_EQ(cache.Remove((*rows)[0].id).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.Get((*rows)[0].id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.Lookup(p).outcome, CacheOutcome::kMiss);
  EXPECT_EQ(cache.List()->size(), 1u);
}

// --- Files that cannot serve: reported once, then ignored ---

// The cache is off, said once; lookups miss, stores fail softly.
void ExpectOffOnce(ScheduleCache& cache, const std::string& why) {
  const Problem p = UnitProblem(2, 4, true);
  EXPECT_EQ(cache.Lookup(p).outcome, CacheOutcome::kMiss);
  EXPECT_FALSE(cache.Store(p, Timed(p, "1f1b")).ok());
  EXPECT_FALSE(cache.enabled());
  std::optional<std::string> w = cache.TakeWarning();
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find(why), std::string::npos) << *w;
  EXPECT_FALSE(cache.TakeWarning());
  EXPECT_EQ(cache.Lookup(p).outcome, CacheOutcome::kMiss);
  EXPECT_FALSE(cache.TakeWarning());
}

TEST_F(CacheTest, GarbageFileIsReportedAndIgnored) {
  std::ofstream(File("g.db")) << std::string(5000, 'x') << "garbage";
  ScheduleCache cache = ScheduleCache::Open(File("g.db"));
  ExpectOffOnce(cache, "not a database");
}

TEST_F(CacheTest, DirectoryIsReportedAndIgnored) {
  ScheduleCache cache = ScheduleCache::Open(dir_.string());
  ExpectOffOnce(cache, "is a directory");
}

TEST_F(CacheTest, TruncatedFileIsReportedAndIgnored) {
  const std::string path = File("t.db");
  {
    ScheduleCache cache = ScheduleCache::Open(path);
    for (int m : {8, 9, 10, 11, 12}) {
      const Problem p = UnitProblem(4, m, true);
      ASSERT_TRUE(cache.Store(p, Timed(p, "zb-h1")).ok());
    }
  }  // closing checkpoints the WAL into the file
  ASSERT_FALSE(fs::exists(path + "-wal"));
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 3 * 4096u);
  // Cut inside the header, the schema page, and the rows.
  for (std::uintmax_t cut : {std::uintmax_t{60}, std::uintmax_t{3000}, size / 2}) {
    fs::copy_file(path, File("cut.db"), fs::copy_options::overwrite_existing);
    fs::resize_file(File("cut.db"), cut);
    ScheduleCache cache = ScheduleCache::Open(File("cut.db"));
    const Problem p = UnitProblem(4, 12, true);
    const CacheLookup found = cache.Lookup(p);
    if (found.outcome != CacheOutcome::kMiss) ExpectCertified(p, found);  // never a wrong one
    (void)cache.Store(p, Timed(p, "1f1b"));
    EXPECT_FALSE(cache.enabled()) << "cut at " << cut;
    EXPECT_TRUE(cache.TakeWarning().has_value()) << "cut at " << cut;
    fs::remove(File("cut.db-wal"));
    fs::remove(File("cut.db-shm"));
  }
}

TEST_F(CacheTest, UnwritableFolderIsReportedAndIgnored) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  fs::create_directories(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  ScheduleCache cache = ScheduleCache::Open(File("ro/c.db"));
  ExpectOffOnce(cache, "unable to open");
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
}

// --- Several writers ---

// Two processes store 200 rows each at once, every row its own key (the comm
// times of a 3-device problem in 5% steps); none is lost.
TEST_F(CacheTest, TwoProcessesWriteAtOnce) {
  constexpr int kPerProcess = 200;
  const Problem base = UnitProblem(3, 4, true);
  const Solution orders = testing::Solve(base, "1f1b");
  std::vector<Problem> problems;
  std::vector<TimedSchedule> schedules;
  for (int i = 0; i < 2 * kPerProcess; ++i) {
    Problem p = base;
    p.comm = {0.01 * std::pow(1.05, i % 20), 0.01 * std::pow(1.05, i / 20)};
    schedules.push_back(ToTimed(p, orders.schedule, Simulate(p, orders.schedule).value()));
    problems.push_back(std::move(p));
  }
  const std::string path = File("shared.db");
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the child opens its own connection, stores its half, says how it went
      int failed = 0;
      {
        ScheduleCache cache = ScheduleCache::Open(path);
        for (int i = w * kPerProcess; i < (w + 1) * kPerProcess; ++i) {
          StatusOr<CacheStored> put = cache.Store(problems[i], schedules[i]);
          failed += !put.ok() || put->outcome != StoreOutcome::kAdded;
        }
      }
      _exit(failed > 0 ? 1 : 0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer lost rows";
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ figures  ] " << 2 * kPerProcess << " stores by 2 processes at once: " << ms
            << " ms\n";
  ScheduleCache cache = ScheduleCache::Open(path);
  StatusOr<std::vector<CacheEntry>> rows = cache.List();
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(rows->size(), 2u * kPerProcess);
  EXPECT_EQ(cache.Lookup(problems[123]).outcome, CacheOutcome::kHit);
}

// Two processes that open a new file at once both find it a cache: one
// creates the table, the other sees it whole or not at all (one snapshot).
TEST_F(CacheTest, TwoProcessesCreateTheFileAtOnce) {
  for (int round = 0; round < 20; ++round) {
    const std::string path = File("new-" + std::to_string(round) + ".db");
    pid_t children[2];
    for (pid_t& pid : children) {
      pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) _exit(ScheduleCache::Open(path).enabled() ? 0 : 1);
    }
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace optpipe
