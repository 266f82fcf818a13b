-- luacheck's settings for the Redis backend's scripts (diskfrontier/redisfrontier/lua/; .ci/run lints them with
-- `luacheck diskfrontier/redisfrontier/lua`, from the project's folder). Redis runs a script after the fragments
-- its "-- uses:" line names (redisfrontier/lua/__init__.py): each file is checked knowing the names those
-- fragments define at their top level, and a fragment is not blamed for names it defines for its scripts.

std = "lua51+redis"
stds.redis = {read_globals = {"redis", "KEYS", "ARGV", "struct", "cjson", "cmsgpack", "bit"}}
max_line_length = 120

local lfs = require("lfs")
local root = "diskfrontier/redisfrontier/lua/"

local function read(path)
  local file = assert(io.open(path, "r"))
  local text = file:read("*a")
  file:close()
  return text
end

local function lines(text)
  return (text .. "\n"):gmatch("(.-)\n")
end

-- The fragments a file's header names ("-- uses: common, seen"), in order.
local function uses(text)
  local names = {}
  for line in lines(text) do
    if line:sub(1, 2) ~= "--" then break end
    local list = line:match("^%-%-%s*uses:(.*)$")
    if list then
      for name in list:gmatch("[%w_]+") do names[#names + 1] = name end
      break
    end
  end
  return names
end

-- The names a fragment defines at its top level (the lines that begin with "local", not indented).
local function defined(text)
  local names = {}
  for line in lines(text) do
    local list = line:match("^local function ([%w_]+)") or line:match("^local ([%w_, ]+)=")
                 or line:match("^local ([%w_, ]+)$")
    if list then
      for name in list:gmatch("[%w_]+") do names[#names + 1] = name end
    end
  end
  return names
end

local function settings(path, fragment)
  local text = read(path)
  local known = {}
  for _, name in ipairs(uses(text)) do
    for _, each in ipairs(defined(read(root .. "fragments/" .. name .. ".lua"))) do known[#known + 1] = each end
  end
  local ignored = {}
  if fragment then
    for _, name in ipairs(defined(text)) do ignored[#ignored + 1] = "2[13]1/^" .. name .. "$" end
  end
  files[path] = {globals = known, ignore = ignored}
end

for name in lfs.dir(root) do
  if name:match("%.lua$") then settings(root .. name, false) end
end
for name in lfs.dir(root .. "fragments") do
  if name:match("%.lua$") then settings(root .. "fragments/" .. name, true) end
end
