// Fibers: a function run on a stack of its own that can be suspended and resumed by switching
// contexts, a few nanoseconds and no system call (x86-64: the callee-saved registers, MXCSR and
// the x87 control word are saved on the suspended stack). The runtime runs each virtual device's
// program on one, so devices that outnumber the cores share threads and a device waiting at a
// collective hands its thread to another device with a function call, not an OS context switch.
//
// A fiber is resumed only by the thread that started it (thread-local state, including what the
// compiler caches of it, stays valid). AddressSanitizer and ThreadSanitizer are told about every
// switch.
#ifndef SHARDJIT_RUNTIME_FIBER_H_
#define SHARDJIT_RUNTIME_FIBER_H_

#include <cstddef>

namespace shardjit::runtime {

// Where a suspended execution resumes: its stack pointer, plus what the sanitizers keep per stack.
struct ExecutionContext {
  void* sp = nullptr;
  // The stack it runs on ([bottom, bottom + size)); a thread's own stack is learned when it
  // first switches away from it.
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;
  void* tsan_fiber = nullptr;
};

// Suspends the calling execution into `from` and resumes `to`. `from_exits` (a fiber's last
// switch) lets the sanitizers drop its stack's bookkeeping.
void SwitchContext(ExecutionContext& from, ExecutionContext& to, bool from_exits = false);

// A stack and the context that runs `body(arg)` on it.
class Fiber {
 public:
  using Body = void (*)(void* arg);

  // Reserves `stack_bytes` of address space (committed as it is touched) under a guard page, so
  // that an overflow faults instead of writing over other memory.
  explicit Fiber(size_t stack_bytes = kDefaultStackBytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run `body(arg)` from the top of its stack at the next switch to
  // context(); when body returns, the fiber switches to `exit_to` for good (until the next
  // Prepare). Only while the fiber is not running.
  void Prepare(Body body, void* arg, ExecutionContext* exit_to);

  ExecutionContext& context() { return context_; }

  static constexpr size_t kDefaultStackBytes = 8 << 20;

  // The first frame on a prepared fiber's stack (called from its trampoline).
  static void Entry(Fiber* self);

 private:

  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  ExecutionContext context_;
  Body body_ = nullptr;
  void* arg_ = nullptr;
  ExecutionContext* exit_to_ = nullptr;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_FIBER_H_
