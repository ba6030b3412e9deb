-- spec/support/servers.lua -- real servers for the HTTP tests, each on a free loopback
-- port in a temporary folder, stopped by the caller:
--   M.httpd()  the tests' own server (spec/support/httpd.lua): slow, echo, redirect,
--              status and broken answers
--   M.nginx()  Debian's nginx with a generated config: static files under its www folder
--              (gzip on for text), plain HTTP and HTTPS with a certificate made by openssl
--              now (its CA file is s.ca_file; the name is localhost and 127.0.0.1)
--   M.redis{fsync=}  Debian's redis-server (never the system's service): AOF on
--              (appendfsync always unless fsync says: a restart loses nothing), its files in the temporary folder;
--              s.url, s.port, s.stop(), s.kill() (SIGKILL), s.restart() (the same port
--              and files: what was written survives), s.cli(args) (redis-cli's output)
-- Each returns a table with url(path), port, dir and stop(); nil and why when the server
-- cannot start here (nginx not installed).
local M = {}

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local function tmpdir()
  local p = assert(io.popen("mktemp -d"))
  local d = p:read("l")
  p:close()
  return d
end

local function slurp(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Waits up to ms for path to exist (a server saying it is ready).
local function wait_for(path, ms)
  for _ = 1, ms / 20 do
    if slurp(path) then return true end
    os.execute("sleep 0.02")
  end
  return false
end

-- A free loopback port (bound and let go: a small race, fine on a test machine).
function M.free_port()
  local p = assert(io.popen([[lua5.4 -e 'local uv = require "luv"; local s = uv.new_tcp();
    s:bind("127.0.0.1", 0); io.write(s:getsockname().port); s:close(); uv.run()']]))
  local port = tonumber(p:read("a"))
  p:close()
  return port
end

function M.httpd()
  local dir = tmpdir()
  local pidfile = dir .. "/pid"
  sh(("lua5.4 spec/support/httpd.lua %s/port >%s/log 2>&1 & echo $! > %s"):format(dir, dir, pidfile))
  if not wait_for(dir .. "/port", 5000) then return nil, "httpd did not start: " .. (slurp(dir .. "/log") or "") end
  local s = { dir = dir, port = tonumber(slurp(dir .. "/port")) }
  function s.url(path) return ("http://127.0.0.1:%d%s"):format(s.port, path) end
  function s.stop()
    sh("kill " .. slurp(pidfile):gsub("%s", "") .. " 2>/dev/null")
    sh("rm -rf " .. dir)
  end
  return s
end

-- opts: { gzip = false } serves without compression (for the benchmark)
function M.nginx(opts)
  local bin = io.popen("command -v nginx || ls /usr/sbin/nginx 2>/dev/null"):read("l")
  if not bin or bin == "" then return nil, "nginx is not installed (make deps)" end
  local dir = tmpdir()
  local port, tls = M.free_port(), M.free_port()
  sh("mkdir -p " .. dir .. "/www " .. dir .. "/tmp")
  if not sh(("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 1 " ..
             "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1")
            :format(dir, dir)) then
    return nil, "openssl could not make a certificate"
  end
  local root = io.popen("id -u"):read("l") == "0"
  local conf = ([[
%s
worker_processes 1;
daemon on;
pid %s/nginx.pid;
error_log %s/error.log;
worker_rlimit_nofile 40000;
events { worker_connections 30000; }
http {
  access_log off;
  client_body_temp_path %s/tmp/body; proxy_temp_path %s/tmp/proxy;
  fastcgi_temp_path %s/tmp/fcgi; uwsgi_temp_path %s/tmp/uwsgi; scgi_temp_path %s/tmp/scgi;
  default_type text/plain;
  %s
  keepalive_requests 100000;
  server { listen 127.0.0.1:%d; root %s/www; }
  server { listen 127.0.0.1:%d ssl; http2 on; ssl_certificate %s/cert.pem;
           ssl_certificate_key %s/key.pem; root %s/www; }
}
]]):format(root and "user root;" or "", dir, dir, dir, dir, dir, dir, dir,
    (opts or {}).gzip == false and "gzip off;" or "gzip on; gzip_min_length 0; gzip_types text/plain application/json;",
    port, dir, tls, dir, dir, dir)
  -- nginx 1.22 takes "http2" on the listen line, not as a directive
  conf = conf:gsub("ssl; http2 on;", "ssl http2;")
  local f = assert(io.open(dir .. "/nginx.conf", "w"))
  f:write(conf)
  f:close()
  if not sh(("%s -p %s -c %s/nginx.conf -e %s/error.log 2>%s/start.log"):format(bin, dir, dir, dir, dir)) or
     not wait_for(dir .. "/nginx.pid", 5000) then
    local why = (slurp(dir .. "/start.log") or "") .. (slurp(dir .. "/error.log") or "")
    sh("rm -rf " .. dir)
    return nil, "nginx did not start: " .. why
  end
  local s = { dir = dir, port = port, tls_port = tls, ca_file = dir .. "/cert.pem" }
  function s.url(path) return ("http://127.0.0.1:%d%s"):format(port, path) end
  function s.tls_url(path) return ("https://localhost:%d%s"):format(tls, path) end
  function s.file(name, text)
    local w = assert(io.open(dir .. "/www/" .. name, "wb"))
    w:write(text)
    w:close()
  end
  function s.stop()
    sh(("kill $(cat %s/nginx.pid) 2>/dev/null; sleep 0.1; rm -rf %s"):format(dir, dir))
  end
  return s
end

function M.redis(opts)
  local fsync = opts and opts.fsync or "always"
  if not sh("command -v redis-server >/dev/null 2>&1") then return nil, "redis-server is not installed" end
  local dir, port = tmpdir(), M.free_port()
  local conf = dir .. "/redis.conf"
  local f = assert(io.open(conf, "w"))
  f:write(("port %d\nbind 127.0.0.1\ndir %s\nappendonly yes\nappendfsync %s\nsave \"\"\n" ..
           "daemonize yes\npidfile %s/redis.pid\nlogfile %s/redis.log\n"):format(port, dir, fsync, dir, dir))
  f:close()
  local s = { dir = dir, port = port, url = ("redis://127.0.0.1:%d"):format(port) }
  function s.cli(args)
    local p = assert(io.popen(("redis-cli -p %d %s 2>&1"):format(port, args)))
    local out = p:read("a")
    p:close()
    return out
  end
  -- a command given as its words (each quoted for the shell): what redis-cli printed
  function s.call(words)
    local parts = {}
    for i, w in ipairs(words) do parts[i] = "'" .. tostring(w):gsub("'", "'\\''") .. "'" end
    return s.cli(table.concat(parts, " "))
  end
  function s.start()
    os.remove(dir .. "/redis.pid")
    if not sh("redis-server " .. conf .. " >/dev/null 2>&1") then return false end
    for _ = 1, 250 do
      if s.cli("ping"):match("PONG") then return true end
      os.execute("sleep 0.02")
    end
    return false
  end
  local function pid() return (slurp(dir .. "/redis.pid") or ""):gsub("%s", "") end
  function s.kill()
    local p = pid()
    if p ~= "" then sh("kill -9 " .. p .. " 2>/dev/null") end
    for _ = 1, 250 do
      if not s.cli("ping"):match("PONG") then break end
      os.execute("sleep 0.02")
    end
  end
  function s.restart()
    s.kill()
    return s.start()
  end
  function s.stop()
    s.kill()
    sh("rm -rf " .. dir)
  end
  if not s.start() then
    local why = slurp(dir .. "/redis.log") or ""
    sh("rm -rf " .. dir)
    return nil, "redis-server did not start: " .. why
  end
  return s
end

return M
