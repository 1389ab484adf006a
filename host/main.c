/*
** main.c -- the tunelua executable: LuaJIT 2.1 with lpeg and the FFI
** bindings of libtunelua preloaded. Everything the user sees (script
** running, -e, -i, the REPL, subcommands) is decided by the Lua module
** tunelua.cli; this file only builds the Lua state, finds the Lua modules
** (source tree or installed tree, no environment variables needed) and
** offers line editing and tab completion to the REPL through the small
** "tunelua.host" module.
*/
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>

#include "tunelua.h"
#include <lualib.h>
#include <readline/history.h>
#include <readline/readline.h>

extern const char tl_cdef_text[];
int luaopen_lpeg(lua_State *L);

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* The data root holds lua/, networks/ and scripts/. Installed trees put it
** at <prefix>/share/tunelua next to <prefix>/bin/tunelua; build trees use the
** source directory the build was configured from. */
static void find_root(char *root, size_t n, char *exe, size_t en) {
  ssize_t k = readlink("/proc/self/exe", exe, en - 1);
  exe[k > 0 ? k : 0] = 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", exe);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  char probe[PATH_MAX + 64];
  snprintf(probe, sizeof probe, "%s/../share/tunelua/lua/tunelua/init.lua", dir);
  if (file_exists(probe)) {
    size_t k2 = strlen(dir);
    if (k2 + 18 < n) {
      memcpy(root, dir, k2);
      memcpy(root + k2, "/../share/tunelua", 18);
      return;
    }
  }
  snprintf(probe, sizeof probe, "%s/lua/tunelua/init.lua", TL_SOURCE_DIR);
  if (file_exists(probe)) {
    snprintf(root, n, "%s", TL_SOURCE_DIR);
    return;
  }
  snprintf(root, n, "%s", TL_DATADIR_INSTALLED);
}

/* ---- tunelua.host: what only the host can offer ------------------------- */

/* Tab completion: while host.readline(prompt, complete) waits, readline's
** completion hook calls the Lua function complete(word, line, start) (start is
** the 0-based offset of word in line) on the same Lua state and offers the
** strings of the list it returns. The host owns the Lua state; the library
** takes no part in this. */
static lua_State *rl_L;     /* set during host.readline with a completer */
static int rl_complete_ref = LUA_NOREF;
static char **rl_cands;      /* the completer's answer, NULL-terminated */
static size_t rl_ncands, rl_next;

static void free_cands(void) {
  for (size_t i = 0; i < rl_ncands; i++) free(rl_cands[i]);
  free(rl_cands);
  rl_cands = NULL;
  rl_ncands = rl_next = 0;
}

static char *cand_generator(const char *text, int state) {
  (void)text;
  if (state == 0) rl_next = 0;
  if (rl_next >= rl_ncands) return NULL;
  return strdup(rl_cands[rl_next++]);
}

static char **host_attempt_completion(const char *text, int start, int end) {
  (void)end;
  rl_attempted_completion_over = 1;  /* no file-name completion as a fallback */
  rl_completion_append_character = '\0'; /* the user goes on with '.', ':' or '(' */
  free_cands();
  lua_State *L = rl_L;
  if (!L) return NULL;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, rl_complete_ref);
  lua_pushstring(L, text);
  lua_pushstring(L, rl_line_buffer);
  lua_pushinteger(L, start);
  if (lua_pcall(L, 3, 1, 0) == 0 && lua_istable(L, -1)) {
    size_t n = lua_objlen(L, -1);
    rl_cands = calloc(n + 1, sizeof *rl_cands);
    for (size_t i = 0; rl_cands && i < n; i++) {
      lua_rawgeti(L, -1, (int)i + 1);
      const char *c = lua_tostring(L, -1);
      if (c && (rl_cands[rl_ncands] = strdup(c))) rl_ncands++;
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  if (rl_ncands == 0) return NULL;
  return rl_completion_matches(text, cand_generator);
}

static int host_readline(lua_State *L) {
  const char *prompt = luaL_optstring(L, 1, "> ");
  int has_completer = lua_isfunction(L, 2);
  if (has_completer) {
    lua_pushvalue(L, 2);
    rl_complete_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    rl_L = L;
    rl_attempted_completion_function = host_attempt_completion;
    /* '.' and ':' stay inside a word: "tl.autotvm.ta" completes as one */
    rl_completer_word_break_characters = " \t\n\"'`@$><=;|&{}()[],+-*/%^~#";
  } else {
    rl_attempted_completion_function = NULL;
  }
  char *line = readline(prompt);
  if (has_completer) {
    luaL_unref(L, LUA_REGISTRYINDEX, rl_complete_ref);
    rl_complete_ref = LUA_NOREF;
    rl_L = NULL;
    free_cands();
  }
  if (!line) return 0;
  lua_pushstring(L, line);
  free(line);
  return 1;
}

static int host_add_history(lua_State *L) {
  add_history(luaL_checkstring(L, 1));
  return 0;
}

static int host_read_history(lua_State *L) {
  lua_pushboolean(L, read_history(luaL_checkstring(L, 1)) == 0);
  return 1;
}

static int host_write_history(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int keep = (int)luaL_optinteger(L, 2, 1000);
  int ok = write_history(path) == 0;
  if (ok) history_truncate_file(path, keep);
  lua_pushboolean(L, ok);
  return 1;
}

static int host_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 0)));
  return 1;
}

static const luaL_Reg host_funcs[] = {
  {"readline", host_readline},
  {"add_history", host_add_history},
  {"read_history", host_read_history},
  {"write_history", host_write_history},
  {"isatty", host_isatty},
  {NULL, NULL}
};

static int open_host(lua_State *L) {
  luaL_register(L, "tunelua.host", host_funcs);
  return 1;
}

static int open_cdef(lua_State *L) {
  lua_pushstring(L, tl_cdef_text);
  return 1;
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = "(error object is not a string)";
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* lua_close runs every finalizer left, and it must run them interpreted. In
** LuaJIT 2.1 as shipped by Debian 12 (2.1.0~beta3+git20220320), a `for k in
** pairs(t)` loop compiles to a root trace that starts at its ITERN. When the
** loop ends, the trace's guard on next()'s key exits to that ITERN, which
** enters the same trace again: the JIT normally breaks the cycle by compiling
** a side trace once the exit is hot, but never inside a finalizer (__gc runs
** with the compiler held off), so a finalizer reaching the end of such a loop
** whose exit had no side trace yet spun forever (measure.cleanup's loop over
** build directories, from the guards a runner leaves). Later LuaJIT resumes
** such an exit at the original ITERN. So the JIT is turned off and every
** trace flushed before the close: the bytecode is unpatched and no compiled
** code runs in the finalizers.
**
** Should a finalizer still not return, the run's work is done and its files
** are synced by then, so after a limit the process says so and exits with the
** script's status instead of hanging. */
#define CLOSE_LIMIT_S 60          /* TUNELUA_CLOSE_LIMIT_S overrides it */
static volatile sig_atomic_t close_status;
static char close_msg[160];

static void close_timeout(int sig) {
  (void)sig;
  ssize_t w = write(2, close_msg, strlen(close_msg));
  (void)w;
  _exit(close_status);
}

static void close_state(lua_State *L, int status) {
  const char *env = getenv("TUNELUA_CLOSE_LIMIT_S");
  int limit = env && atoi(env) > 0 ? atoi(env) : CLOSE_LIMIT_S;
  snprintf(close_msg, sizeof close_msg,
           "tunelua: the Lua state did not close within %d s (its finalizers); exiting with "
           "status %d without it\n", limit, status);
  close_status = status;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = close_timeout;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  alarm((unsigned)limit);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_FLUSH);
  lua_close(L);
  alarm(0);
}

int main(int argc, char **argv) {
  /* A write past a file-size limit fails with EFBIG, which the writers report
  ** naming the file, instead of killing the process without a word. */
  signal(SIGXFSZ, SIG_IGN);
  char root[PATH_MAX], exe[PATH_MAX];
  find_root(root, sizeof root, exe, sizeof exe);

  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "tunelua: cannot create the Lua state (out of memory)\n");
    return 1;
  }
  luaL_openlibs(L);

  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_lpeg);
  lua_setfield(L, -2, "lpeg");
  lua_pushcfunction(L, open_cdef);
  lua_setfield(L, -2, "tunelua.cdef");
  lua_pushcfunction(L, open_host);
  lua_setfield(L, -2, "tunelua.host");
  lua_pop(L, 1);
  lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s/?.lua;%s/?/init.lua;",
                  root, root, root, root);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);

  /* host info, read by tunelua.cli */
  open_host(L);
  lua_pushstring(L, root);
  lua_setfield(L, -2, "root");
  lua_pushstring(L, exe);
  lua_setfield(L, -2, "exe");
  lua_pushstring(L, tl_version()); /* also keeps libtunelua linked for ffi.C */
  lua_setfield(L, -2, "version");
  lua_pop(L, 1);

  lua_pushcfunction(L, traceback);
  lua_getglobal(L, "require");
  lua_pushstring(L, "tunelua.cli");
  if (lua_pcall(L, 1, 1, 0) != 0) {
    fprintf(stderr, "tunelua: cannot load the Lua layer from %s/lua: %s\n", root,
            lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_getfield(L, -1, "main");
  lua_createtable(L, argc, 0);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  int status = 1;
  if (lua_pcall(L, 1, 1, -4) != 0) {
    fprintf(stderr, "tunelua: %s\n", lua_tostring(L, -1));
  } else {
    status = (int)lua_tointeger(L, -1);
  }
  fflush(stdout);
  close_state(L, status);
  return status;
}
