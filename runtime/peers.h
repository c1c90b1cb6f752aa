// Peers: the other processes of a run with one process per device (started
// by a launcher, Open MPI's mpirun): rank r runs device r's lanes. The
// executor (runtime/executor.h) sends a dependency's message, with the
// payload it carries, to the rank of the consumer; ranks agree on each
// iteration's origin, tell each other when they stop, and rank 0 gathers
// what every rank measured.
//
// Clocks: at Connect rank 0 exchanges a few pings with every rank and keeps
// the offset of the fastest one (Cristian's method); clock_error_s() is the
// largest half round trip, the bound on the error of a shared time.
//
//   StatusOr<std::unique_ptr<Peers>> peers = ConnectPeers();  // MPI_Init_thread inside
//   ExecutorOptions opt;  opt.peers = peers->get();             // rank r runs device r
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

class Peers {
 public:
  virtual ~Peers() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Largest error of a time shared between ranks (half the slowest best ping), seconds.
  virtual double clock_error_s() const = 0;

  // Point to point, one message per dependency and iteration (`tag`: the
  // edge): `bytes` of payload and when the producer ended, in seconds since
  // the iteration's origin. Send does not block; Recv waits, and gives up
  // (Cancelled) once `control` stops.
  virtual Status Send(int to, int tag, const void* data, std::size_t bytes, double end_s) = 0;
  virtual StatusOr<double> Recv(int from, int tag, void* data, std::size_t bytes,
                                const RunControl& control) = 0;
  // Waits for this iteration's sends to complete (or `control` to stop).
  virtual Status Flush(const RunControl& control) = 0;

  // Every rank calls it at the start of an iteration: rank 0's `proposal`,
  // in this process's clock.
  virtual StatusOr<Clock::time_point> AgreeOrigin(Clock::time_point proposal) = 0;
  // Tells every other rank that this one stopped, and why (once; does not block).
  virtual void Abort(const std::string& why) = 0;
  // Another rank's notice, if one came: "rank 2: device 2: op 2F3 failed: ...".
  virtual std::optional<std::string> Aborted() = 0;
  // Rank 0 receives every rank's `mine` (all of one size), rank after rank.
  virtual Status Gather(const std::vector<double>& mine, std::vector<double>* all) = 0;
  // Rank 0's `text` to every rank (all call it).
  virtual Status Broadcast(std::string& text) = 0;
  // Every rank calls it after an iteration: true when it went well on all.
  virtual StatusOr<bool> AllOk(bool ok) = 0;
  // Leaves the job after a run that ended well on every rank.
  virtual void Finalize() = 0;
};

// True when a launcher started this process as one of several ranks
// (Open MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_RANK of others).
bool LaunchedAsRanks();

// Joins the launcher's ranks (MPI_Init_thread with MPI_THREAD_MULTIPLE) and
// aligns the clocks. kNotApplicable in a build without MPI.
StatusOr<std::unique_ptr<Peers>> ConnectPeers();

}  // namespace optpipe::runtime
