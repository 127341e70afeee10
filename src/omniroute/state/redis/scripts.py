"""Lua scripts of the Redis routing state (STORE-2): the operations that touch several keys at once
and must do so atomically on the server. Each is a source string; the backend registers it once per
client (``EVALSHA`` with a fallback to ``EVAL``)."""

from __future__ import annotations

__all__ = ["INFLIGHT_ADD", "INFLIGHT_GET", "REMOVE", "SCAN"]

SCAN = """
-- KEYS[1] index set; ARGV[1] record key prefix -> {id1, value1, id2, value2, ...}
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local v = redis.call('GET', ARGV[1] .. id)
  if v then
    out[#out + 1] = id
    out[#out + 1] = v
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
"""
"""Every record of one kind with its id; prunes index entries whose record is gone."""

REMOVE = """
-- KEYS[1] index set; ARGV[1] record key prefix; ARGV[2..] (field, value) pairs that must all
-- equal the stored JSON record's fields (no pairs: every record). Returns the number removed.
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. id
  local match = true
  if #ARGV > 1 then
    local v = redis.call('GET', key)
    if v then
      local rec = cjson.decode(v)
      for i = 2, #ARGV, 2 do
        if tostring(rec[ARGV[i]]) ~= ARGV[i + 1] then
          match = false
          break
        end
      end
    end
  end
  if match then
    redis.call('DEL', key)
    redis.call('SREM', KEYS[1], id)
    n = n + 1
  end
end
return n
"""
"""Delete the records of one kind whose fields match (operator resets)."""

_INFLIGHT_SUM = """
local function totals(replicas, prefix, first)
  local sums = {}
  for i = first, #ARGV do sums[i - first + 1] = 0 end
  if #ARGV < first then return sums end
  for _, r in ipairs(redis.call('SMEMBERS', replicas)) do
    local key = prefix .. r
    if redis.call('EXISTS', key) == 0 then
      redis.call('SREM', replicas, r)
    else
      local vals = redis.call('HMGET', key, unpack(ARGV, first))
      for i, v in ipairs(vals) do
        if v then sums[i] = sums[i] + tonumber(v) end
      end
    end
  end
  return sums
end
"""

INFLIGHT_GET = (
    _INFLIGHT_SUM
    + """
-- KEYS[1] replica set; ARGV[1] per-replica hash prefix; ARGV[2..] connection ids -> counts
return totals(KEYS[1], ARGV[1], 2)
"""
)
"""In-flight counts summed over the live replicas' hashes."""

INFLIGHT_ADD = (
    _INFLIGHT_SUM
    + """
-- KEYS[1] replica set, KEYS[2] this replica's hash; ARGV[1] hash prefix, ARGV[2] replica id,
-- ARGV[3] ttl ms, ARGV[4] delta (+1/-1), ARGV[5] connection id -> the connection's total count
local n = redis.call('HINCRBY', KEYS[2], ARGV[5], tonumber(ARGV[4]))
if n <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[5])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  redis.call('SADD', KEYS[1], ARGV[2])
end
return totals(KEYS[1], ARGV[1], 5)[1]
"""
)
"""Add ±1 to this replica's count of a connection (renewing its TTL); returns the summed count."""
