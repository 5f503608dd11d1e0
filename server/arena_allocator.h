// Request and response of a unary call on one protobuf arena (the callback
// API's MessageAllocator): a call's strings and sub-messages come from a
// block inside the holder instead of one malloc and free each.
#pragma once

#include <cstddef>

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace gangsched::server {

// The first arena block of a unary call, inside its message holder. A dry
// run's request and reply take about 3 KiB of arena (with the arena's own
// header and its cleanup list for the strings): 8 KiB keeps them, and a
// GetWorkload's, off the heap.
inline constexpr size_t kCallArenaInlineBytes = 8192;

// Options for an arena whose first block is `block` (inside an object or
// on the stack): messages that fit it cost no heap block at all.
template <size_t N>
google::protobuf::ArenaOptions FirstBlockIn(char (&block)[N]) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = N;
  return options;
}

template <typename Request, typename Response>
class ArenaAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder;
  }

  // One stateless allocator per message pair, for SetMessageAllocatorFor_*.
  static ArenaAllocator* Get() {
    static ArenaAllocator allocator;
    return &allocator;
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(FirstBlockIn(block_)) {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(
          google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    // Most requests and replies fit; bigger ones grow the arena by heap
    // blocks.
    alignas(std::max_align_t) char block_[kCallArenaInlineBytes];
    google::protobuf::Arena arena_;
  };
};

// Installs ArenaAllocator on the given methods of a callback service:
//   GANGSCHED_ARENA(Allocate, AllocateRequest, AllocateResponse);
#define GANGSCHED_ARENA(method, request, response) \
  SetMessageAllocatorFor_##method(                 \
      ArenaAllocator<v1::request, v1::response>::Get())

}  // namespace gangsched::server
