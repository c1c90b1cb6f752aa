// ListSchedule: a memory- and offload-aware list scheduler over the op DAG.
//
// It generalises AdaOffload (OptPipe, 2025, App. D) and PipeOffload's
// selective offload (Wan et al., ICML 2025, §2) to any placement, heterogeneous stages and
// both objectives. Time advances event by event; whenever a device is idle it
// starts the best available op:
//   1. a W, if W runs eagerly (right after its B);
//   2. a B, the one with the longest remaining backward chain (critical path);
//   3. an F, earliest micro-batch first, if its stage has fewer than
//      warm-up-depth activations in flight and the activation fits in memory
//      (keeping room for one reload, so the backward can always proceed);
//   4. a W, to fill what would otherwise be a bubble, or to free memory.
// When a device is short of memory for its warm-up, activations whose backward
// lies far enough ahead to hide a round trip (O + R) are offloaded as their F
// ends (the longest-lived first, as PipeOffload prefers), and reloaded just in
// time: when fewer than `reload_lookahead` backwards of their stage remain
// before theirs, when the reload would not end before the backward can start
// (the micro-batch's last finished op plus the rest of its F..B chain), and
// when the device keeps room for the forwards of that micro-batch on its
// later stages. Options judge "far enough ahead" by the
// activation's own trip through the later stages (offloading already in the
// warm-up) and keep one micro-batch in a few on the device for a link too slow
// to carry them all. Copies of devices sharing a host link take turns on it;
// a reload that is due goes before a ready offload (a backward waits for it),
// or, as an option, after it (the offload frees room a forward waits for).
// As an option the scheduler goes breadth first: every forward it may start
// before any backward, which, with every activation offloaded, turns a link
// too slow for 1F1B's steady state into two phases, the forwards as fast as
// the link takes their activations and the backwards with the reloads of the
// next ones hidden behind them (ListOptions::breadth_first). As another, the
// micro-batches kept on the first stage run express: each device reserves the
// times their chains reach it and fits other ops around them, so that these
// activations live shortest (ListOptions::express).
// Reloads, and forwards passed over while ready, are held at the time the
// scheduler started them (Schedule::release): replayed as soon as possible
// they would take memory planned for others.
//
// Cost: O(N log N) for N ops (heaps per device), no simulation inside.
//
//   ListOptions opt;            // defaults: 1F1B-like warm-up, lazy W
//   StatusOr<Schedule> s = ListSchedule(problem, opt);
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "heuristics/local_search.h"

namespace optpipe {

struct ListOptions {
  // Warm-up depth of stage s = round(warmup_scale * d_s), where d_s is the
  // number of micro-batches the device can work on while the first one makes
  // its round trip from F(s) to B(s) (1F1B's S - s on unit costs), at least 1.
  double warmup_scale = 1.0;
  // true: W right after its B (1F1B); false: W fills bubbles (Zero Bubble).
  bool eager_w = false;
  // Offload when memory is short and the problem allows it.
  bool offload = true;
  // Reload (s,m) once at most this many backwards of stage s precede B(s,m).
  int reload_lookahead = 1;
  // Judge whether an activation lives long enough to hide its round trip by
  // its own way through the later stages and back (at least that long), not
  // only by the backwards of its stage still ahead of it: offloads already in
  // the warm-up, where those are few.
  bool offload_warmup = false;
  // Keep every keep_every-th micro-batch's activations on the device (0:
  // offload all that qualify), for links too slow to carry all.
  int keep_every = 0;
  // Per activation (stage * microbatches + microbatch), when set (size S * M;
  // it replaces keep_every): kByRule leaves it to the offload rules, kKeep
  // keeps it on the device, kSend offloads it as its F ends (where its device
  // is short of memory and it is not on the last stage).
  enum Choice : char { kByRule = 0, kKeep = 1, kSend = 2 };
  std::vector<char> choice;
  // Explicit warm-up depth per stage [S]; when set, warmup_scale is ignored.
  std::vector<int> warmup_depth;
  // A host link starts a ready offload before a due reload (false: the reload).
  bool offload_first = false;
  // Breadth first (GPipe's order where the warm-up depth lets every
  // micro-batch in): a device starts any forward it may before a backward,
  // its stages one after another (every micro-batch of the first, then of the
  // next), keeping no room for its later stages; its backwards run later
  // stage first, and a reload waits until fewer than reload_lookahead
  // backwards of the device precede its own in that order.
  bool breadth_first = false;
  // Express lanes: a micro-batch kept on the first stage runs its F..B chain
  // without waiting; as its first forward starts, every device reserves the
  // times its chain ops will run at, and other ops there start only if they
  // end before the next reservation (a device may idle for one). Its
  // activations live shortest, so a device short of memory and link keeps
  // them instead of offloading them.
  bool express = false;
};

// The warm-up depth per stage that `opt` gives (see ListOptions).
std::vector<int> WarmupDepths(const Problem& p, const ListOptions& opt);

// The choice per activation (stage * M + micro-batch) that `opt` makes:
// opt.choice, or else kKeep for keep_every's micro-batches on every stage.
std::vector<char> Choices(const Problem& p, const ListOptions& opt);

// kInfeasible when these options deadlock under the memory limit. With
// `timing`, also the times the scheduler ran the ops at, summarised as the
// simulator does: the schedule's holds make the simulator replay exactly
// these (tests check it), so a search can rank candidates by them and
// simulate only what it keeps.
StatusOr<Schedule> ListSchedule(const Problem& p, const ListOptions& opt,
                                SimResult* timing = nullptr);

// The setting in words: "breadth first, lazy W, offload, look-ahead 1, 3 kept".
std::string Describe(const Problem& p, const ListOptions& opt);

// The settings BuildList tries: warm-up scales, eager/lazy W, offload on/off
// and reload look-ahead, and where offload applies one micro-batch in 3 or 4
// kept (with and without express lanes) and breadth first with every
// micro-batch in (only what makes a difference for `p`).
std::vector<ListOptions> ListOptionGrid(const Problem& p);
struct ListChoice {
  ListOptions options;
  Schedule schedule;
};
// The best simulated schedule over ListOptionGrid that fits memory.limit, with
// the options that gave it (heuristics/best_fitting.h; opt may cut it short).
StatusOr<ListChoice> BestListChoice(const Problem& p, const SearchOptions& opt = {});
// BestListChoice's schedule: the "list" method.
StatusOr<Schedule> BuildList(const Problem& p, const SearchOptions& opt = {});

}  // namespace optpipe
