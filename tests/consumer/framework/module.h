// The consumer's own framework/module.h: gat's headers must not pick it up instead of theirs.
#pragma once

namespace consumer {
struct Module {
  int answer() const { return 42; }
};
}  // namespace consumer
