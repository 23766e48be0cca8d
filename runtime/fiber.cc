#include "runtime/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "runtime/sanitizers.h"

#ifdef SHARDJIT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SHARDJIT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "runtime/fiber.cc switches contexts for x86-64 only"
#endif

extern "C" {
// Saves the callee-saved state on the current stack, stores the stack pointer in *from_sp and
// continues on `to_sp` (a stack saved the same way, or a fiber's prepared first frame).
void shardjit_switch_stack(void** from_sp, void* to_sp);
// The first return address of a prepared fiber: calls shardjit_fiber_entry(r12).
void shardjit_fiber_trampoline();
void shardjit_fiber_entry(void* fiber);
}

asm(R"(
  .text
  .globl shardjit_switch_stack
  .type shardjit_switch_stack, @function
  .p2align 4
shardjit_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size shardjit_switch_stack, .-shardjit_switch_stack

  .globl shardjit_fiber_trampoline
  .type shardjit_fiber_trampoline, @function
  .p2align 4
shardjit_fiber_trampoline:
  movq %r12, %rdi
  andq $-16, %rsp
  call shardjit_fiber_entry
  ud2
  .size shardjit_fiber_trampoline, .-shardjit_fiber_trampoline
)");

namespace shardjit::runtime {
namespace {

// The context the running execution was switched away from, for the sanitizers' bookkeeping on
// the side that resumes.
thread_local ExecutionContext* switched_from = nullptr;

// Completes a switch on the resumed side: `self` runs again (asan_fake_stack: what it saved).
void FinishSwitch([[maybe_unused]] ExecutionContext* self) {
#ifdef SHARDJIT_ASAN
  ExecutionContext* from = switched_from;
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(self != nullptr ? self->asan_fake_stack : nullptr, &bottom,
                                  &size);
  if (from != nullptr && from->stack_bottom == nullptr) {  // a thread's stack, learned now
    from->stack_bottom = bottom;
    from->stack_size = size;
  }
#endif
}

}  // namespace

void SwitchContext(ExecutionContext& from, ExecutionContext& to, bool from_exits) {
#ifdef SHARDJIT_ASAN
  __sanitizer_start_switch_fiber(from_exits ? nullptr : &from.asan_fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)from_exits;
#endif
#ifdef SHARDJIT_TSAN
  if (from.tsan_fiber == nullptr) from.tsan_fiber = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  switched_from = &from;
  shardjit_switch_stack(&from.sp, to.sp);
  FinishSwitch(&from);
}

Fiber::Fiber(size_t stack_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t usable = (stack_bytes + page - 1) / page * page;
  mapping_bytes_ = usable + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping_ == MAP_FAILED || mprotect(mapping_, page, PROT_NONE) != 0) {
    std::fprintf(stderr, "shardjit: cannot map a %zu-byte fiber stack\n", mapping_bytes_);
    std::abort();
  }
  context_.stack_bottom = static_cast<char*>(mapping_) + page;
  context_.stack_size = usable;
#ifdef SHARDJIT_TSAN
  context_.tsan_fiber = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#ifdef SHARDJIT_TSAN
  __tsan_destroy_fiber(context_.tsan_fiber);
#endif
  munmap(mapping_, mapping_bytes_);
}

void Fiber::Prepare(Body body, void* arg, ExecutionContext* exit_to) {
  body_ = body;
  arg_ = arg;
  exit_to_ = exit_to;
  // The first frame, as shardjit_switch_stack leaves a suspended one: control words, r15..r12,
  // rbx, rbp, then the trampoline as return address (r12 carries `this`).
  auto top = reinterpret_cast<uintptr_t>(context_.stack_bottom) + context_.stack_size;
  auto* slot = reinterpret_cast<uint64_t*>(top & ~uintptr_t{15});
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  *--slot = 0;                                                       // alignment
  *--slot = reinterpret_cast<uint64_t>(&shardjit_fiber_trampoline);  // return address
  *--slot = 0;                                                       // rbp
  *--slot = 0;                                                       // rbx
  *--slot = reinterpret_cast<uint64_t>(this);                        // r12
  *--slot = 0;                                                       // r13
  *--slot = 0;                                                       // r14
  *--slot = 0;                                                       // r15
  *--slot = uint64_t{mxcsr} | (uint64_t{fpucw} << 32);
  context_.sp = slot;
  context_.asan_fake_stack = nullptr;
}

void Fiber::Entry(Fiber* self) {
  FinishSwitch(nullptr);
  self->body_(self->arg_);
  SwitchContext(self->context_, *self->exit_to_, /*from_exits=*/true);
  std::fprintf(stderr, "shardjit: a finished fiber was resumed\n");
  std::abort();
}

}  // namespace shardjit::runtime

extern "C" void shardjit_fiber_entry(void* fiber) {
  shardjit::runtime::Fiber::Entry(static_cast<shardjit::runtime::Fiber*>(fiber));
}
