// SearchTimeIndexed: exact probes "does a schedule end by T?" as SAT problems
// on a time grid, solved by CaDiCaL; offload and memory limits included.
//
// Where every duration and comm time is a multiple of the time grain g
// (TimeGrain), the least makespan has a schedule whose starts are multiples
// of g too, so a probe may ask for integer starts s_i in grains. Each op i
// gets the order encoding of its start on its window [head, T - d_i - tail]
// (one variable "s_i <= t" per t; Tamura et al., "Compiling finite linear CSP
// into SAT", 2009, the encoding that closed open job-shop instances): a
// precedence s_j >= s_i + d_i + lag is one binary clause per t; two ops of a
// lane that the DAG does not order get an order variable and two clauses per
// t; the O and R of an activation exist only when its offload variable is
// set, and the round trips of a host link fit between its earliest copy
// start and its latest copy end (a cardinality constraint that the order
// clauses imply only by pigeonhole counting, which resolution cannot do
// briefly: with it, probes that prove "none by T" end sooner). Memory is
// checked at every grid instant (it changes only there): the activations of
// a device that are live then (started and not yet freed by B, W or O, or
// reloaded by R) weigh at most its room, a pseudo-Boolean constraint in
// integer multiples of a memory grain, encoded as a sequential weighted
// counter (Hoelldobler, Manthey, Steinke, KI 2012). Micro-batches are
// interchangeable, so their stage-0 forwards run in order (a true symmetry,
// unlike the MILP's per-stage order, which offload breaks).
//
// Probes bisect the grain multiples between the bound and the incumbent
// (the first, and the first after each schedule found, just below the best,
// since heuristic incumbents tend to be close, 1, 2, 4, ... grains below it
// while these find schedules, no lower than the upper middle; the others at
// the upper middle): a schedule
// by T (decoded, re-timed by the Simulator) is the new incumbent, "none by T"
// raises the bound to T + g, and the two meeting prove the incumbent optimal.
// A probe gets half of the time left (the last one all of it; one just
// below the best an eighth on a fine grid, where it gains one grain of many
// and is mostly cut short, and on a large problem, see SatSearchIsLarge,
// where it is cut short too); one cut short
// proves nothing and sends the next probes below it. Where the first probe
// below the best is cut short (or too large to encode), or on a fine grid
// (more than 32 grains between the bound and the best) finds a schedule,
// which gains one grain of many, a large neighbourhood search may follow
// (Shaw, CP 1998; neighbourhood_share): each solver asks again for a
// schedule a grain better, assuming the best's lane orders and offload
// choices except for the ops it starts within a random time window, whose
// width grows after a window proves empty and shrinks after one is cut
// short, again while it finds better schedules (it finds them where probes
// on the whole problem find nothing); its windows prove nothing.
// Except on a fine grid, every other step instead takes two random
// micro-batches out and lets them go back anywhere (their ops and offloads
// free, the other ops in the best's order among themselves): a change no
// time window holds, such as keeping a micro-batch's activations and running
// its chain at once. On a fine grid, a search that has found nothing for a
// quarter of its time ends early and leaves the rest to the probes, which
// may still find one-grain steps there.
// Where the whole problem is too large to encode, the neighbourhoods encode
// only their windows, each on a fresh solver: the best's ops that start
// before the window keep their times, those after it start a grain earlier,
// those within it start anywhere in it.
// Racing solvers
// (`solvers`, one thread each) are encoded once, at the first probe's
// horizon, within the time limit (checked op by op; the first probe's share
// counts from the encoding's end): a later probe, and a later call given the
// same SatSession, assumes a literal that caps every op's end, so what they
// learned carries over. The first solver's first guesses follow the
// incumbent's times when they are given (hint). Exact
// for the problem, with or without offload. Cost: the grid has H = T / g
// columns; the encoding has O(ops * H) variables and O(pairs * H) clauses
// (a 4x8 problem with offload and T = 30: about 10k variables and 90k
// clauses), so it applies to problems of a few thousand ops at most on a
// coarse grain (see SatSearchApplies).
//
//   SatSearchOptions opt;
//   SatSearchResult r = SearchTimeIndexed(problem, lower_bound, incumbent_objective, opt);
//   // r.bound: proven; r.schedule: better than the incumbent, when found
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"

namespace optpipe {

// The racing solvers of SearchTimeIndexed with their encoding, kept from one
// call to the next on the same problem: a later call whose targets lie below
// the horizon they were encoded at (the first call's first target) reuses
// them, and what they learned, instead of encoding afresh (seconds on 8x16
// problems); one above it encodes anew. One problem per session, one call
// at a time.
struct SatSearchOptions;
struct SatSearchResult;
class SatSession {
 public:
  SatSession();
  ~SatSession();
  SatSession(const SatSession&) = delete;
  SatSession& operator=(const SatSession&) = delete;

 private:
  friend SatSearchResult SearchTimeIndexed(const Problem& p, double lower_bound, double incumbent,
                                           const SatSearchOptions& opt);
  struct Racers;  // exact/sat_search.cc
  std::unique_ptr<Racers> racers_;
};

struct SatSearchOptions {
  double time_limit_s = 1.0;
  const std::atomic<bool>* stop = nullptr;
  // A probe whose encoding would exceed this many clause literals is not run.
  std::int64_t max_literals = 40'000'000;
  std::function<void(const std::string&)> log;  // one line per probe
  // A known schedule's times (the incumbent's): the first solver's first guesses.
  const SimResult* hint = nullptr;
  // Solvers racing on every probe, each on its own thread with its own seed
  // (the first guesses go to the first): the first to decide ends the others.
  int solvers = 2;
  // Keeps the solvers for a later call (see SatSession); null: a call's own.
  SatSession* session = nullptr;
  // With a hint: once a probe just below the best is cut short (the whole
  // problem too hard to decide), or on a fine grid finds a schedule, this
  // share of the time left goes to a large neighbourhood search around the
  // best schedule (see above), and again while it finds better ones; 0: none.
  double neighbourhood_share = 0;
  // Called with every schedule better than the best so far that a probe or a
  // neighbourhood finds (simulated, valid; one call at a time, from the
  // search's threads), for a caller that weighs schedules otherwise.
  std::function<void(const Schedule&, const SimResult&)> on_schedule;
};

struct SatSearchResult {
  double bound = 0;  // no schedule ends earlier (at least the lower bound given)
  // The best schedule found, when better than the incumbent given (simulated, valid).
  std::optional<Schedule> schedule;
  std::optional<SimResult> sim;
  double best = 0;       // the best objective known: the incumbent's or the schedule's
  bool optimal = false;  // a probe below `best` found none
  int probes = 0;
  std::int64_t variables = 0, clauses = 0;  // of the largest probe
  int encodings = 0;                // encodings this call built (0: it reused its session's)
  int neighbourhood_schedules = 0;  // better schedules the neighbourhood search found
};

// More grains than this between the bound and the best make a grid fine:
// there a probe below the best rarely decides (on the 4x8 problems on a grain
// of 0.01, none), and the search gives the neighbourhoods more of its time.
constexpr int kFineSteps = 32;

// The makespan objective; a time grain (TimeGrain > 0); every op longer than
// zero; memory amounts (activation, freed_by_b, offloadable and their
// differences) multiples of a memory grain in {1, 1/2, ..., 1/1000} with every
// device's room at most 1000 grains.
bool SatSearchApplies(const Problem& p);

// Problems of 256 compute ops or more (8x16: 256 with one chunk, 384 with a
// split backward, 512 with two chunks) are large for the probes: there a
// probe on the whole problem below a good schedule is mostly cut short, and
// the neighbourhoods find the better schedules.
bool SatSearchIsLarge(const Problem& p);

// The literals of the lanes' order clauses of a probe by `horizon`, most of
// its encoding (about 20 million are encoded a second): what a caller with
// little time may weigh before it starts. Requires SatSearchApplies(p).
std::int64_t SatLaneLiterals(const Problem& p, double horizon);

// `lower_bound`: a proven bound; `incumbent`: the objective of a known
// schedule (the probes look below it). Requires SatSearchApplies(p).
SatSearchResult SearchTimeIndexed(const Problem& p, double lower_bound, double incumbent,
                                  const SatSearchOptions& opt);

// The large neighbourhood search alone (see above), around `best` (a
// schedule's times) for opt.time_limit_s, its encoding included: res.schedule
// is the best schedule it found when better than best.objective; it proves
// no bound. Requires SatSearchApplies(p).
SatSearchResult SearchNeighbourhoods(const Problem& p, const SimResult& best,
                                     const SatSearchOptions& opt);

}  // namespace optpipe
