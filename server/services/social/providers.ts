// The configured social providers, speaking OAuth 2 / OpenID Connect through openid-client:
// discovery, PKCE, nonce, token exchange and ID-token validation are the library's, not ours.
import * as oidc from "openid-client";
import type { SocialProviderConfig } from "../../config.ts";
import { AppError, invalidField } from "../../errors.ts";
import type { Logger } from "../../logger.ts";

export type SocialProfile = {
  /** The provider's stable account id: OIDC `sub`, or `id` of a plain OAuth 2 userinfo. */
  subject: string;
  email: string | null;
  emailVerified: boolean;
  name: string | null;
  avatar: string | null;
};

export const INVALID_PROVIDER = "The selected provider is invalid.";
export const INVALID_CODE = "The authorization code is invalid or has expired.";

const asString = (value: unknown) => (typeof value === "string" && value.trim() !== "" ? value.trim() : null);

export class SocialProviders {
  private readonly configurations = new Map<string, Promise<oidc.Configuration>>();

  constructor(
    private readonly providers: SocialProviderConfig[],
    private readonly logger: Logger,
  ) {}

  /** The enabled provider of that name; 422 with key provider otherwise. */
  provider(name: string): SocialProviderConfig {
    const provider = this.providers.find((candidate) => candidate.name === name.toLowerCase());
    if (!provider) throw invalidField("provider", INVALID_PROVIDER);
    return provider;
  }

  isOpenIdConnect(provider: SocialProviderConfig): boolean {
    return Boolean(provider.issuer);
  }

  /** Discovered (OIDC) or built from explicit URLs (plain OAuth 2), once per provider. */
  private configuration(provider: SocialProviderConfig): Promise<oidc.Configuration> {
    let configuration = this.configurations.get(provider.name);
    if (!configuration) {
      configuration = this.build(provider);
      this.configurations.set(provider.name, configuration);
      // A provider that was unreachable is asked again next time.
      configuration.catch(() => this.configurations.delete(provider.name));
    }
    return configuration;
  }

  private async build(provider: SocialProviderConfig): Promise<oidc.Configuration> {
    const insecure = [provider.issuer, provider.authorizationUrl, provider.tokenUrl].some((url) =>
      url?.startsWith("http:"),
    );
    if (insecure) this.logger.warn({ provider: provider.name }, "social provider over plain http (development only)");
    const execute = insecure ? [oidc.allowInsecureRequests] : [];
    try {
      if (provider.issuer) {
        return await oidc.discovery(new URL(provider.issuer), provider.clientId, provider.clientSecret, undefined, {
          execute,
        });
      }
      const configuration = new oidc.Configuration(
        {
          issuer: `urn:chat-service:oauth2:${provider.name}`,
          authorization_endpoint: provider.authorizationUrl,
          token_endpoint: provider.tokenUrl,
          userinfo_endpoint: provider.userinfoUrl,
        },
        provider.clientId,
        provider.clientSecret,
      );
      for (const apply of execute) apply(configuration);
      return configuration;
    } catch (error) {
      this.logger.error({ err: error, provider: provider.name }, "social provider discovery failed");
      throw new AppError("unavailable", "The sign-in provider cannot be reached. Try again later.");
    }
  }

  async authorizationUrl(
    provider: SocialProviderConfig,
    options: { redirectUri: string; state: string; codeVerifier: string; nonce: string | null },
  ): Promise<string> {
    const configuration = await this.configuration(provider);
    const parameters: Record<string, string> = {
      redirect_uri: options.redirectUri,
      response_type: "code",
      state: options.state,
      code_challenge: await oidc.calculatePKCECodeChallenge(options.codeVerifier),
      code_challenge_method: "S256",
    };
    if (provider.scopes) parameters.scope = provider.scopes;
    if (options.nonce) parameters.nonce = options.nonce;
    return oidc.buildAuthorizationUrl(configuration, parameters).toString();
  }

  /** Exchanges the code (checking state, PKCE and, for OIDC, the ID token) for the profile. */
  async exchange(
    provider: SocialProviderConfig,
    options: {
      code: string;
      state: string | null;
      redirectUri: string;
      codeVerifier: string | null;
      nonce: string | null;
    },
  ): Promise<SocialProfile> {
    const configuration = await this.configuration(provider);
    const callbackUrl = new URL(options.redirectUri);
    callbackUrl.searchParams.set("code", options.code);
    if (options.state) callbackUrl.searchParams.set("state", options.state);
    // The state was already matched to its stored record by the caller; RFC 9207's `iss`
    // parameter guards the same mix-up, so it is supplied when the provider announces it.
    if (configuration.serverMetadata().authorization_response_iss_parameter_supported) {
      callbackUrl.searchParams.set("iss", configuration.serverMetadata().issuer);
    }
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(configuration, callbackUrl, {
        pkceCodeVerifier: options.codeVerifier ?? undefined,
        expectedState: options.state ?? oidc.skipStateCheck,
        expectedNonce: options.nonce ?? undefined,
        idTokenExpected: this.isOpenIdConnect(provider),
      });
    } catch (error) {
      this.logger.info({ err: error, provider: provider.name }, "social code exchange refused");
      throw invalidField("code", INVALID_CODE);
    }
    return this.isOpenIdConnect(provider)
      ? this.openIdProfile(configuration, tokens)
      : this.oauth2Profile(provider, configuration, tokens.access_token);
  }

  private async openIdProfile(
    configuration: oidc.Configuration,
    tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>,
  ): Promise<SocialProfile> {
    const claims = tokens.claims();
    if (!claims) throw invalidField("code", INVALID_CODE);
    let source: Record<string, unknown> = claims;
    // Some providers put e-mail and name only in the userinfo response.
    if (!asString(claims.email) && configuration.serverMetadata().userinfo_endpoint) {
      source = { ...(await oidc.fetchUserInfo(configuration, tokens.access_token, claims.sub)), ...claims };
    }
    return {
      subject: claims.sub,
      email: asString(source.email)?.toLowerCase() ?? null,
      emailVerified: source.email_verified === true || source.email_verified === "true",
      name: asString(source.name) ?? asString(source.preferred_username),
      avatar: asString(source.picture),
    };
  }

  /** Plain OAuth 2 (GitHub style): the profile comes from the userinfo URL. */
  private async oauth2Profile(
    provider: SocialProviderConfig,
    configuration: oidc.Configuration,
    accessToken: string,
  ): Promise<SocialProfile> {
    if (!provider.userinfoUrl)
      throw new AppError("unavailable", "The sign-in provider has no userinfo URL configured.");
    const response = await oidc.fetchProtectedResource(
      configuration,
      accessToken,
      new URL(provider.userinfoUrl),
      "GET",
    );
    if (!response.ok) throw invalidField("code", INVALID_CODE);
    const profile = (await response.json()) as Record<string, unknown>;
    const subject = profile.sub ?? profile.id;
    if (subject === undefined || subject === null) throw invalidField("code", INVALID_CODE);
    return {
      subject: String(subject),
      email: asString(profile.email)?.toLowerCase() ?? null,
      // GitHub only shows verified addresses as a profile's e-mail; a provider that says
      // otherwise (email_verified / verified false) is believed.
      emailVerified: profile.email_verified !== false && profile.verified !== false,
      name: asString(profile.name) ?? asString(profile.login),
      avatar: asString(profile.avatar_url) ?? asString(profile.picture),
    };
  }
}
