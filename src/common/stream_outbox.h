// What a server stream has to write, in order, one write at a time, and
// its finish, which waits for the write in flight: the bookkeeping a gRPC
// ServerBidiReactor needs because it may have one write outstanding and
// must not Finish while a write is. `Status` is the stream's status type
// (grpc::Status), kept to hand to Finish.
//
// Not thread-safe: the stream calls it under its own mutex. The message a
// call returns stays put until the next WriteDone: only WriteDone pops.
#pragma once

#include <deque>
#include <optional>
#include <utility>

namespace horovodd {

template <typename Message, typename Status>
class StreamOutbox {
 public:
  // Whether a write is in flight.
  bool writing() const { return writing_; }
  // Whether the stream finished, or will once the write in flight is done:
  // nothing more is queued then.
  bool closing() const { return finished_ || finish_pending_; }

  // Queues `message` (dropped when closing). Returns it when the caller
  // must start its write (none was in flight), else nullptr.
  const Message* Push(Message message) {
    if (closing()) return nullptr;
    outbox_.push_back(std::move(message));
    if (writing_) return nullptr;
    writing_ = true;
    return &outbox_.front();
  }

  // What the stream does once a write is done: start `next`, or Finish with
  // `finish` (the end that waited for the write).
  struct AfterWrite {
    const Message* next = nullptr;
    std::optional<Status> finish;
  };
  AfterWrite WriteDone(bool ok) {
    AfterWrite after;
    outbox_.pop_front();
    if (ok && !outbox_.empty()) {
      after.next = &outbox_.front();
      return after;
    }
    writing_ = false;
    if (finish_pending_ && !finished_) {
      finished_ = true;
      after.finish = final_status_;
    }
    return after;
  }

  // Ends the stream with `status`: true when the caller finishes it now
  // (nobody else will); false when it is finished or finishing already, or
  // when the write in flight finishes it (WriteDone hands `status` back).
  bool ClaimFinish(const Status& status) {
    if (closing()) return false;
    if (writing_) {
      finish_pending_ = true;
      final_status_ = status;
      return false;
    }
    finished_ = true;
    return true;
  }

 private:
  std::deque<Message> outbox_;
  bool writing_ = false;
  bool finish_pending_ = false;
  bool finished_ = false;
  Status final_status_;
};

}  // namespace horovodd
