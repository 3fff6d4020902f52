// Backend errors carry errno and a human sentence; the handler picks the reply.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace backend {

struct Error {
  int code = 0;          // errno value (EIO, ESRCH, ...)
  std::string message;   // a sentence a user can act on
};

// Minimal expected<T, Error> (C++20 has no std::expected).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error errno_error(std::string what, int code = errno);  // "what: strerror(code)"

}  // namespace backend

#include <cstring>
inline backend::Error backend::errno_error(std::string what, int code) {
  return Error{code, what + ": " + std::strerror(code)};
}
