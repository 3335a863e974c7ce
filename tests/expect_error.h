// expect_error_naming: asserts that a call throws a gat::Error whose message names every part.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gat/framework/check.h"

namespace gat::testing {

template <class F>
void expect_error_naming(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a gat::Error";
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message '" << e.what() << "' lacks '" << part << "'";
  }
}

}  // namespace gat::testing
