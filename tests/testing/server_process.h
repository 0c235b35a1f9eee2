// Test helper: runs twice-server and the twice CLI as real child processes.
#ifndef TWICE_TESTS_TESTING_SERVER_PROCESS_H_
#define TWICE_TESTS_TESTING_SERVER_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/temp_dir.h"

extern char** environ;

namespace twice::testing {

inline std::string BinaryDir() {
  const char* dir = std::getenv("TWICE_BINARY_DIR");
  return dir != nullptr ? dir : "build";
}
inline std::string ServerBinary() {
  return BinaryDir() + "/services/twice-server";
}
inline std::string CliBinary() { return BinaryDir() + "/services/twice"; }
inline std::string BenchBinary() { return BinaryDir() + "/bench/twice-bench"; }

// Runs a command to completion; returns its exit code and stdout.
struct CommandResult {
  int exit_code = -1;
  std::string out;
};

inline CommandResult RunCommand(const std::vector<std::string>& argv) {
  std::string command;
  for (const std::string& arg : argv) {
    command += "'";
    for (char c : arg)
      command += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += "' ";
  }
  command += "2>/dev/null";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// twice-server as a child process on 127.0.0.1:0.
class ServerProcess {
 public:
  ~ServerProcess() { Stop(); }

  // Starts the server and waits for its "listening on" line. Returns false
  // when it exits first; its stderr is then in `stderr_text()`.
  bool Start(const std::vector<std::string>& extra_args,
             const std::string& log_path) {
    log_path_ = log_path;
    // Later flags win, so `extra_args` may name another role.
    std::vector<std::string> args = {ServerBinary(), "--role=all",
                                     "--listen=127.0.0.1:0"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);

    int out_pipe[2];
    if (pipe(out_pipe) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int spawned =
        posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    if (spawned != 0) {
      close(out_pipe[0]);
      pid_ = -1;
      return false;
    }
    // Read the first stdout line: "twice-server listening on HOST:PORT".
    auto read_line = [&] {
      std::string line;
      char c;
      while (read(out_pipe[0], &c, 1) == 1 && c != '\n') line.push_back(c);
      return line;
    };
    const std::string line = read_line();
    const std::string prefix = "twice-server listening on ";
    if (line.rfind(prefix, 0) != 0) {
      close(out_pipe[0]);
      exit_code_ = Wait();
      return false;
    }
    address_ = line.substr(prefix.size());
    // With --internal-listen, role all prints its internal address next.
    bool internal = false;
    for (const std::string& arg : extra_args) {
      if (arg.rfind("--internal-listen=", 0) == 0 ||
          arg.rfind("--internal_listen=", 0) == 0) {
        internal = true;
      }
    }
    if (internal) {
      const std::string second = read_line();
      const std::string internal_prefix = "twice-server internal services on ";
      if (second.rfind(internal_prefix, 0) == 0) {
        internal_address_ = second.substr(internal_prefix.size());
      }
    }
    close(out_pipe[0]);
    return true;
  }

  // Sends SIGTERM and returns the exit code (-1 if killed by a signal).
  int Stop() {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, SIGTERM);
    exit_code_ = Wait();
    return exit_code_;
  }

  // Sends SIGKILL (no drain, no flush: a crash) and reaps the process.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    exit_code_ = Wait();
  }

  const std::string& address() const { return address_; }
  // Role all's --internal-listen address; empty without one.
  const std::string& internal_address() const { return internal_address_; }
  int exit_code() const { return exit_code_; }
  std::string stderr_text() const {
    FILE* f = fopen(log_path_.c_str(), "r");
    if (f == nullptr) return "";
    std::string text;
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), f)) > 0) {
      text.append(buffer.data(), n);
    }
    fclose(f);
    return text;
  }

 private:
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string address_;
  std::string internal_address_;
  std::string log_path_;
};

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_SERVER_PROCESS_H_
