// A small REST caller: what an older app does with fetch.
export type ApiResponse<T = any> = { status: number; body: T; headers: Headers };

export type CallOptions = { body?: unknown; token?: string; headers?: Record<string, string> };

export function restClient(baseUrl: string) {
  async function call<T = any>(method: string, path: string, options: CallOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
    // A FormData body goes as multipart/form-data, its Content-Type (with the boundary) set by fetch.
    const isForm = options.body instanceof FormData;
    if (
      options.body !== undefined &&
      !isForm &&
      !Object.keys(headers).some((name) => name.toLowerCase() === "content-type")
    ) {
      headers["Content-Type"] = "application/json";
    }
    if (options.token) headers.Authorization = `Bearer ${options.token}`;
    const response = await fetch(baseUrl + path, {
      method,
      headers,
      body:
        options.body === undefined
          ? undefined
          : typeof options.body === "string" || options.body instanceof FormData
            ? options.body
            : JSON.stringify(options.body),
    });
    const text = await response.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON: leave the text for the assertion to show.
    }
    return { status: response.status, body, headers: response.headers };
  }
  return {
    call,
    get: <T = any>(path: string, options?: CallOptions) => call<T>("GET", path, options),
    post: <T = any>(path: string, body?: unknown, options?: CallOptions) => call<T>("POST", path, { ...options, body }),
    put: <T = any>(path: string, body?: unknown, options?: CallOptions) => call<T>("PUT", path, { ...options, body }),
    patch: <T = any>(path: string, body?: unknown, options?: CallOptions) =>
      call<T>("PATCH", path, { ...options, body }),
    delete: <T = any>(path: string, options?: CallOptions) => call<T>("DELETE", path, options),
  };
}

export type RestClient = ReturnType<typeof restClient>;
