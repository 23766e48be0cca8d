// The processes of a distributed job connected by Gloo (two TCP connections per pair of
// processes, one for each direction): the runtime's ProcessGroup (runtime/remote.h). Each process
// runs, per peer, a receiving thread that keeps an envelope posted for the peer's next message (so
// a small message leaves at once, whole), receives what did not fit in it straight into place (a
// payload into a tensor of its type), and hands the message to the run it belongs to, keeping
// those of runs not begun yet. Posting never blocks a device: operands stay alive until the peer
// has taken them, which the run's own thread waits for at the run's end (a sending thread per
// peer meanwhile, when many messages wait). A peer whose connection fails fails every run it
// takes part in at once, naming it; one that said goodbye fails only runs that begin later.
// Destroying the group says goodbye to every peer and waits (up to the timeout) for theirs, so no
// process closes a connection another still reads from.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_PROCESS_GROUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "runtime/remote.h"

namespace shardjit::runtime::distributed {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // The address this process accepts its peers' connections on.
  std::string hostname = "127.0.0.1";
  // How long to wait for the others: connecting, exchanging blocks, agreeing, flushing sends.
  absl::Duration timeout = absl::Seconds(60);
};

// Connects to the other processes through `store` (every process calls it with its rank; the
// store must live as long as the group: `keep_alive` holds whatever serves it).
absl::StatusOr<std::shared_ptr<ProcessGroup>> ConnectGloo(
    const GlooOptions& options, std::shared_ptr<gloo::rendezvous::Store> store,
    std::shared_ptr<void> keep_alive = nullptr);

}  // namespace shardjit::runtime::distributed

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
