-- Runs once in each shard's Lua state, with the standard libraries and
-- the ones Stria adds (redis, bit, cjson, cmsgpack, struct) in _G. It
-- moves every global into a hidden table that _G reads through, so a
-- script can read what Redis's scripts can read, cannot make or change a
-- global ("Attempt to modify a readonly table") and gets Redis's error
-- for a global that does not exist. Libraries are read-only proxies.
-- Returns the hidden table and the function that runs a script.

local raw_setmetatable, raw_rawset, raw_rawget, raw_error = setmetatable, rawset, rawget, error
local raw_pairs, raw_type, raw_tostring, raw_xpcall = pairs, type, tostring, xpcall

local G = _G
local lib = {}
for k, v in raw_pairs(G) do
  lib[k] = v
end
for k in raw_pairs(lib) do
  G[k] = nil
end

-- What Redis's scripts do not get.
lib.loadfile, lib.dofile, lib.print, lib.require, lib.module = nil, nil, nil, nil, nil
lib.io, lib.package, lib.newproxy = nil, nil, nil
lib.os = { clock = lib.os and lib.os.clock }

-- Code only as text: Lua 5.1 would load a binary chunk (string.dump's)
-- unchecked, so loadstring and load take one as the text it is not, and
-- fail as Redis's Lua fails on it.
local raw_loadstring, raw_load, raw_concat = lib.loadstring, lib.load, lib.table.concat
-- How Lua names a chunk in its errors.
local function chunkid(name)
  local first = name:sub(1, 1)
  if first == "=" or first == "@" then
    return name:sub(2, 60)
  end
  local text = name:match("^[^%z]*")
  local line = text:match("^[^\n\r]*"):sub(1, 45)
  if #line < #text then
    line = line .. "..."
  end
  return '[string "' .. line .. '"]'
end
lib.loadstring = function(code, name)
  if raw_type(code) == "string" and code:sub(1, 1) == "\27" then
    return nil, chunkid(name or code) .. ":1: unexpected symbol near 'char(27)'"
  end
  return raw_loadstring(code, name)
end
lib.load = function(reader, name)
  if raw_type(reader) ~= "function" then
    return raw_load(reader, name)
  end
  local parts = {}
  while true do
    local part = reader()
    if part == nil or part == "" then
      break
    end
    if raw_type(part) ~= "string" then
      return nil, "reader function must return a string"
    end
    parts[#parts + 1] = part
  end
  return lib.loadstring(raw_concat(parts), name or "=(load)")
end

local protected = raw_setmetatable({}, { __mode = "k" })

local function readonly_error()
  raw_error("Attempt to modify a readonly table", 2)
end

local function readonly(t)
  local proxy = {}
  raw_setmetatable(proxy, { __index = t, __newindex = readonly_error, __metatable = false })
  protected[proxy] = true
  return proxy
end

-- The calls into the server: redis.call raises a command's error,
-- redis.pcall returns it as {err = ...}. `__host` is set for each run.
-- It takes the arguments in a table: a C function's stack holds 8000
-- values, and a command may have nearly that many arguments.
local redis = lib.redis
local raw_select = lib.select
redis.call = function(...)
  local ok, v = lib.__host(false, raw_select("#", ...), { ... })
  if not ok then
    raw_error(v, 0)
  end
  return v
end
redis.pcall = function(...)
  local _, v = lib.__host(false, raw_select("#", ...), { ... })
  return v
end
-- Whether the script's user may run a command: `__host` asked with true
-- answers (true, allowed) or (false, an error).
redis.acl_check_cmd = function(...)
  local ok, v = lib.__host(true, raw_select("#", ...), { ... })
  if not ok then
    raw_error(v, 0)
  end
  return v
end
redis.error_reply = function(msg)
  if raw_type(msg) ~= "string" then
    raw_error("wrong number or type of arguments", 2)
  end
  if msg == "" then
    msg = "ERR"
  end
  return { err = msg }
end
redis.status_reply = function(msg)
  if raw_type(msg) ~= "string" then
    raw_error("wrong number or type of arguments", 2)
  end
  return { ok = msg }
end

-- FUNCTION LOAD runs a library with `__registering` set: its functions
-- are collected there.
redis.register_function = function(...)
  local reg = raw_rawget(lib, "__registering")
  if reg == nil then
    raw_error("redis.register_function can only be called on FUNCTION LOAD command", 2)
  end
  local n = select("#", ...)
  local a, b = ...
  local name, fn, flags, desc
  if n == 1 then
    if raw_type(a) ~= "table" then
      raw_error("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).", 2)
    end
    name, fn, flags, desc = a.function_name, a.callback, a.flags, a.description
    for k in raw_pairs(a) do
      if k ~= "function_name" and k ~= "callback" and k ~= "flags" and k ~= "description" then
        raw_error("unknown argument given to redis.register_function", 2)
      end
    end
    if name == nil then
      raw_error("redis.register_function must get a function name argument", 2)
    end
    if fn == nil then
      raw_error("redis.register_function must get a callback argument", 2)
    end
    if raw_type(name) ~= "string" then
      raw_error("function_name argument given to redis.register_function must be a string", 2)
    end
    if raw_type(fn) ~= "function" then
      raw_error("callback argument given to redis.register_function must be a function", 2)
    end
  elseif n == 2 then
    name, fn = a, b
    if raw_type(name) ~= "string" then
      raw_error("first argument to redis.register_function must be a string", 2)
    end
    if raw_type(fn) ~= "function" then
      raw_error("second argument to redis.register_function must be a function", 2)
    end
  else
    raw_error("wrong number of arguments to redis.register_function", 2)
  end
  if not name:match("^[%w_]+$") then
    raw_error("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long", 2)
  end
  for _, r in raw_pairs(reg) do
    if r.name:lower() == name:lower() then
      raw_error("Function already exists in the library", 2)
    end
  end
  local known = { ["no-writes"] = true, ["allow-oom"] = true, ["allow-stale"] = true,
                  ["no-cluster"] = true, ["allow-cross-slot-keys"] = true }
  local fl = {}
  if flags ~= nil then
    if raw_type(flags) ~= "table" then
      raw_error("flags argument to redis.register_function must be a table representing function flags", 2)
    end
    for _, f in raw_pairs(flags) do
      if not known[f] then
        raw_error("unknown flag given", 2)
      end
      fl[#fl + 1] = f
    end
  end
  if desc ~= nil and raw_type(desc) ~= "string" then
    raw_error("description argument given to redis.register_function must be a string", 2)
  end
  reg[#reg + 1] = { name = name, fn = fn, flags = fl, desc = desc }
end

-- What a library sees while FUNCTION LOAD runs it: only registration
-- and logging; every other global and `redis` field is absent.
local load_api = { register_function = redis.register_function, log = redis.log,
                   REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM }
for _, l in raw_pairs({ "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING" }) do
  load_api[l] = redis[l]
end

local function missing(k)
  raw_error("Script attempted to access nonexistent global variable '" .. raw_tostring(k) .. "'", 3)
end

local function strict(t)
  local proxy = {}
  raw_setmetatable(proxy, {
    __index = function(_, k)
      local v = t[k]
      if v == nil then
        missing(k)
      end
      return v
    end,
    __newindex = readonly_error,
    __metatable = false,
  })
  protected[proxy] = true
  return proxy
end

local load_globals = { redis = strict(load_api) }
-- Functions register only while their library loads.
redis.register_function = nil

for _, name in raw_pairs({ "redis", "bit", "cjson", "cmsgpack", "struct", "string", "table", "math", "os", "coroutine" }) do
  if lib[name] ~= nil then
    lib[name] = readonly(lib[name])
  end
end
-- Strings' methods are looked up in the string library: through the
-- read-only one, or getmetatable('').__index would change it for every
-- script.
lib.getmetatable("").__index = lib.string

lib.setmetatable = function(t, mt)
  if protected[t] then
    raw_error("Attempt to modify a readonly table", 2)
  end
  return raw_setmetatable(t, mt)
end
lib.rawset = function(t, k, v)
  if protected[t] then
    raw_error("Attempt to modify a readonly table", 2)
  end
  return raw_rawset(t, k, v)
end
lib._G = G

-- A global is found in `lib` itself, with no function call: the
-- script's reads of `redis` and `KEYS` are a table lookup each. Only a
-- global that does not exist reaches `lib`'s own __index, and its error.
raw_setmetatable(lib, { __index = function(_, k)
  missing(k)
end })
local global = lib

raw_setmetatable(G, { __index = global, __newindex = readonly_error, __metatable = readonly({}) })
protected[G] = true

-- A library's own globals: what FUNCTION LOAD allows while it loads,
-- then (`activate`) what every script sees, for its functions to run.
local envs = raw_setmetatable({}, { __mode = "k" })
local function library_env()
  local env, mt = {}, {}
  mt.__index = function(_, k)
    local v = load_globals[k]
    if v == nil then
      missing(k)
    end
    return v
  end
  mt.__newindex = readonly_error
  mt.__metatable = readonly({})
  raw_setmetatable(env, mt)
  protected[env] = true
  envs[env] = mt
  return env
end
local function activate(env)
  envs[env].__index = global
end

-- A script's error as Redis reports it: a table with the error reply in
-- `err`; a plain Lua error becomes one with the ERR code.
-- Like Redis's, it notes where in the script the error happened.
local user_frame = lib.__where
lib.__where = nil
local function handler(e)
  if raw_type(e) ~= "table" then
    -- An error of the server's own functions comes with its kind and a
    -- traceback: the message alone, as Redis gives it.
    local msg = raw_tostring(e):gsub("^runtime error: ", ""):gsub("%s*stack traceback:.*$", "")
    e = { err = "ERR " .. msg }
  end
  local source, line = user_frame()
  if source ~= nil then
    raw_rawset(e, "source", source)
    raw_rawset(e, "line", line)
  end
  return e
end

-- Runs `f`: with (keys, args) for a function, with none for EVAL (its
-- KEYS and ARGV are globals), with this run's `host`: the server's side
-- of redis.call, redis.pcall and redis.acl_check_cmd. The keys and
-- arguments come as their count and then all of them (made into tables
-- here, in one step each), or with `nkeys` false as two tables (more
-- values than a call's stack holds). Set with plain assignments: `lib`
-- has no __newindex.
local function run(f, with_args, host, nkeys, ...)
  local keys, args
  if nkeys then
    keys, args = { ... }, {}
    for i = nkeys + 1, #keys do
      args[i - nkeys] = keys[i]
      keys[i] = nil
    end
  else
    keys, args = ...
  end
  lib.__host = host
  local ok, v
  if with_args then
    ok, v = raw_xpcall(function()
      return f(keys, args)
    end, handler)
  else
    lib.KEYS = keys
    lib.ARGV = args
    ok, v = raw_xpcall(f, handler)
  end
  lib.__host = nil
  return ok, v
end

return lib, run, library_env, activate
