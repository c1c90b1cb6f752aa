// Peers over MPI (runtime/peers.h): point-to-point messages on a duplicate
// of MPI_COMM_WORLD, abort notices and gathers on two others, so that none
// can match another's messages.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/peers.h"

namespace optpipe::runtime {
namespace {

constexpr int kAbortTag = 1;
constexpr int kPings = 8;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

Status MpiError(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Internal(std::string(call) + ": " + std::string(text, len));
}
#define OPTPIPE_MPI(call)                                                  \
  do {                                                                     \
    if (int rc_ = (call); rc_ != MPI_SUCCESS) return MpiError(rc_, #call); \
  } while (0)

class MpiPeers : public Peers {
 public:
  // Without Finalize (a failed run) the process leaves MPI as it exits:
  // the launcher ends the job, which a finalize could instead hang on.
  void Finalize() override {
    MPI_Comm_free(&data_);
    MPI_Comm_free(&control_);
    MPI_Comm_free(&gather_);
    MPI_Finalize();
  }

  Status Init() {
    int provided = 0;
    OPTPIPE_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    if (provided < MPI_THREAD_MULTIPLE) {
      return Status(StatusCode::kNotApplicable,
                    "MPI: this MPI library gives no MPI_THREAD_MULTIPLE, which the lanes need");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    OPTPIPE_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    OPTPIPE_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    OPTPIPE_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &data_));
    OPTPIPE_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &control_));
    OPTPIPE_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &gather_));
    return AlignClocks();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double clock_error_s() const override { return error_s_; }

  Status Send(int to, int tag, const void* data, std::size_t bytes, double end_s) override {
    Pending p;
    p.buffer.resize(sizeof(double) + bytes);
    std::memcpy(p.buffer.data(), &end_s, sizeof(double));
    if (bytes > 0) std::memcpy(p.buffer.data() + sizeof(double), data, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(p));
    Pending& q = pending_.back();
    OPTPIPE_MPI(MPI_Isend(q.buffer.data(), static_cast<int>(q.buffer.size()), MPI_BYTE, to, tag,
                          data_, &q.request));
    return OkStatus();
  }

  StatusOr<double> Recv(int from, int tag, void* data, std::size_t bytes,
                        const RunControl& control) override {
    std::vector<char> buffer(sizeof(double) + bytes);
    MPI_Request request;
    OPTPIPE_MPI(MPI_Irecv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, from, tag,
                          data_, &request));
    if (Status st = Wait(request, control); !st.ok()) return st;
    double end_s = 0;
    std::memcpy(&end_s, buffer.data(), sizeof(double));
    if (bytes > 0) std::memcpy(data, buffer.data() + sizeof(double), bytes);
    return end_s;
  }

  Status Flush(const RunControl& control) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (Pending& p : pending_) {
      if (Status st = Wait(p.request, control); !st.ok()) return st;
    }
    pending_.clear();
    return OkStatus();
  }

  StatusOr<Clock::time_point> AgreeOrigin(Clock::time_point proposal) override {
    double origin = std::chrono::duration<double>(proposal.time_since_epoch()).count();
    OPTPIPE_MPI(MPI_Bcast(&origin, 1, MPI_DOUBLE, 0, gather_));
    // Rank 0's time, in this clock.
    const double local = origin + offset_s_;
    return Clock::time_point(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(local)));
  }

  void Abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_text_ = "rank " + std::to_string(rank_) + ": " + why;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request request;
      MPI_Isend(abort_text_.data(), static_cast<int>(abort_text_.size()), MPI_CHAR, r, kAbortTag,
                control_, &request);
      MPI_Request_free(&request);
    }
  }

  std::optional<std::string> Aborted() override {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, control_, &flag, &status);
    if (!flag) return std::nullopt;
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string text(static_cast<std::size_t>(count), '\0');
    MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, kAbortTag, control_,
             MPI_STATUS_IGNORE);
    return text;
  }

  Status Broadcast(std::string& text) override {
    std::uint64_t size = text.size();
    OPTPIPE_MPI(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, gather_));
    text.resize(size);
    OPTPIPE_MPI(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, gather_));
    return OkStatus();
  }

  StatusOr<bool> AllOk(bool ok) override {
    int mine = ok ? 1 : 0, all = 0;
    OPTPIPE_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, gather_));
    return all == 1;
  }

  Status Gather(const std::vector<double>& mine, std::vector<double>* all) override {
    if (rank_ == 0) all->assign(mine.size() * static_cast<std::size_t>(size_), 0.0);
    OPTPIPE_MPI(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE,
                           rank_ == 0 ? all->data() : nullptr, static_cast<int>(mine.size()),
                           MPI_DOUBLE, 0, gather_));
    return OkStatus();
  }

 private:
  struct Pending {
    std::vector<char> buffer;
    MPI_Request request;
  };

  // Polls `request` until it completes or `control` stops (then cancels it).
  static Status Wait(MPI_Request& request, const RunControl& control) {
    for (int k = 0;; ++k) {
      int done = 0;
      OPTPIPE_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return OkStatus();
      if (control.stopped()) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
        return Cancelled("stopped");
      }
      if (k > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Rank 0 pings every rank; each keeps the offset of its fastest round trip.
  Status AlignClocks() {
    std::vector<double> offsets(size_, 0.0), errors(size_, 0.0);
    for (int r = 1; r < size_; ++r) {
      double best_rtt = 1e9;
      for (int k = 0; k < kPings; ++k) {
        if (rank_ == 0) {
          const double t0 = Now();
          double remote = 0;
          OPTPIPE_MPI(MPI_Send(&t0, 1, MPI_DOUBLE, r, 0, gather_));
          OPTPIPE_MPI(MPI_Recv(&remote, 1, MPI_DOUBLE, r, 0, gather_, MPI_STATUS_IGNORE));
          const double t1 = Now();
          if (t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            offsets[r] = remote - (t0 + t1) / 2;  // add to rank 0's time: rank r's
            errors[r] = (t1 - t0) / 2;
          }
        } else if (rank_ == r) {
          double t0 = 0;
          OPTPIPE_MPI(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 0, gather_, MPI_STATUS_IGNORE));
          const double now = Now();
          OPTPIPE_MPI(MPI_Send(&now, 1, MPI_DOUBLE, 0, 0, gather_));
        }
      }
    }
    OPTPIPE_MPI(MPI_Bcast(offsets.data(), size_, MPI_DOUBLE, 0, gather_));
    OPTPIPE_MPI(MPI_Bcast(errors.data(), size_, MPI_DOUBLE, 0, gather_));
    offset_s_ = offsets[rank_];
    for (double e : errors) error_s_ = std::max(error_s_, e);
    return OkStatus();
  }

  int rank_ = 0, size_ = 1;
  MPI_Comm data_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL, gather_ = MPI_COMM_NULL;
  double offset_s_ = 0, error_s_ = 0;
  std::mutex mu_;
  std::deque<Pending> pending_;  // sends of this iteration: a deque keeps their addresses
  bool aborted_ = false;
  std::string abort_text_;
};

}  // namespace

bool LaunchedAsRanks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

StatusOr<std::unique_ptr<Peers>> ConnectPeers() {
  auto peers = std::make_unique<MpiPeers>();
  if (Status st = peers->Init(); !st.ok()) return st;
  return std::unique_ptr<Peers>(std::move(peers));
}

}  // namespace optpipe::runtime
